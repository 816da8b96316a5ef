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
        # The settings check the environment at start-up; what is wrong with it is one line
        # for the operator, as a usage error (exit 2), not a traceback.
        sys.stderr.write(f"ImproperlyConfigured: {error}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
