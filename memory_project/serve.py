"""Serve the web app: `python -m memory_project.serve --bind HOST:PORT [gunicorn options]`.

It is gunicorn with the project's config (memory_project/gunicorn_conf.py) and WSGI app. It
exists because gunicorn reads WEB_CONCURRENCY itself the moment it is imported, before it
loads any config: a value that is no whole number stopped it with a traceback, and a
negative one with its own message, before the config could refuse either by name (and a
blank one, which the project reads as unset, stopped it too). Here the config reads it
first, so a malformed value is refused in its one line, and gunicorn is handed the count.
"""

from __future__ import annotations

import os
import sys

from memory_project import gunicorn_conf

if __name__ == "__main__":
    os.environ["WEB_CONCURRENCY"] = str(gunicorn_conf.workers)
    from gunicorn.app.wsgiapp import run

    sys.argv[1:] = [
        "-c",
        "python:memory_project.gunicorn_conf",
        *sys.argv[1:],
        "memory_project.wsgi",
    ]
    run(prog="python -m memory_project.serve")
