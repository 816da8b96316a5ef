"""The settings of the gunicorn the HTTP benchmarks start: the product's, with the bench's
URLconf (bench/server_urls.py). Not a benchmark itself."""

from memory_project.settings import *  # noqa: F403  (the product's settings, unchanged)

ROOT_URLCONF = "server_urls"
