#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_project.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # A setting refused at start-up (memory_project/env.py): its message names the
        # variable, and a traceback through the settings module would only bury it.
        sys.exit(f"Configuration error: {error}")


if __name__ == "__main__":
    main()
