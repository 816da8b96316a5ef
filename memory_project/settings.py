"""Settings for Workspace Memory, read from the environment (see .env.example).

With nothing set, the service runs on its embedded default: a SQLite file under
DATA_DIR, the in-process cache, and Celery tasks run eagerly in the web process.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from memory_project.env import (
    BROKER_SCHEMES,
    REDIS_SCHEMES,
    env_base_url,
    env_bool,
    env_choice,
    env_directory,
    env_ed25519_key,
    env_int,
    env_list,
    env_origins,
    env_rate,
    env_secret,
    env_signing_key,
    env_str,
    service_url_problem,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_directory("DATA_DIR", BASE_DIR / "var")

SECRET_KEY = env_secret("SECRET_KEY", DATA_DIR / "secret_key")
# The deployment key wraps every workspace's data key (workspaces/crypto.py). It is
# kept apart from SECRET_KEY so rotating the session-signing secret never makes stored
# memory unreadable. During a rotation the old keys stay readable from
# CRYPTOGRAPHY_PREVIOUS_KEYS until `manage.py rewrap_data_keys` has run.
DEPLOYMENT_KEY = env_secret("CRYPTOGRAPHY_KEY", DATA_DIR / "cryptography_key")
DEPLOYMENT_PREVIOUS_KEYS = env_list("CRYPTOGRAPHY_PREVIOUS_KEYS", [])
if DEPLOYMENT_KEY == SECRET_KEY:
    raise ImproperlyConfigured("CRYPTOGRAPHY_KEY must differ from SECRET_KEY")
# Signs the receipt the nightly purge records for each org it deletes (automation/receipts.py).
# Its public key is in every receipt and printed by `manage.py purge_receipt public-key`.
PURGE_RECEIPT_SIGNING_KEY = env_ed25519_key(
    "PURGE_RECEIPT_SIGNING_KEY", DATA_DIR / "purge_receipt_signing_key"
)
# django-cryptography's own default key; its import replaces this with a derived key.
CRYPTOGRAPHY_KEY = DEPLOYMENT_KEY

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
if not ALLOWED_HOSTS and not DEBUG:
    # Django would answer every request 400 (DisallowedHost), long after start-up said nothing.
    raise ImproperlyConfigured("ALLOWED_HOSTS names no host; list the served host names")
TRUSTED_ORIGINS = env_origins("TRUSTED_ORIGINS", ["http://127.0.0.1:8000", "http://localhost:8000"])
CSRF_TRUSTED_ORIGINS = TRUSTED_ORIGINS
CSRF_FAILURE_VIEW = "memory_project.api.exceptions.csrf_failure_view"
# The Origin gate on state-changing /api/ routes; REQUIRE_ORIGIN=0 switches it off
# for a rollback without a code change.
REQUIRE_ORIGIN = env_bool("REQUIRE_ORIGIN", True)

INSTALLED_APPS = [
    "memory_project.apps.MemoryAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "workspaces",
    "memory",
    "automation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "memory_project.middleware.ContentSecurityPolicyMiddleware",
    "memory_project.middleware.ApiNoStoreMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Both gates answer before any session or credential is read.
    "memory_project.middleware.RequestSizeLimitMiddleware",
    "memory_project.middleware.OriginGateMiddleware",
    "memory_project.middleware.QueryStringMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out sign-in into its response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "memory_project.urls"
WSGI_APPLICATION = "memory_project.wsgi.application"
ASGI_APPLICATION = "memory_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            # Nearly every template links a static script or style: `static` is built in
            # rather than loaded by each.
            "builtins": ["django.templatetags.static"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(url: str) -> dict[str, object]:
    try:
        # Connections persist between requests; the health check at a request's first
        # query replaces one the server dropped (a restart, a failover) instead of
        # failing that request with it.
        config: dict[str, object] = dict(
            dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        )
    except ValueError as error:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {error}") from None
    engine = config.get("ENGINE")
    if engine == "django.db.backends.sqlite3":
        # IMMEDIATE takes SQLite's write lock at BEGIN, so a transaction that reads
        # then writes can never be overtaken between its read and its write.
        config["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 20}
        config["CONN_MAX_AGE"] = 0
        # The test database is a file beside it, as the product's is, not Django's default
        # shared-cache memory database: there a live server's request reading a table makes
        # the test's own write fail at once ("database table is locked") instead of waiting
        # for the timeout above.
        config["TEST"] = {"NAME": f"{config['NAME']}.test"}
    elif engine == "django.db.backends.postgresql":
        # Django's, with a health check that sends nothing while the connection is quiet
        # (memory_project/postgresql/base.py).
        config["ENGINE"] = "memory_project.postgresql"
        if env_bool("DATABASE_PREPARED_STATEMENTS", True):
            # Parameters bound by the server, and each statement prepared on its connection
            # after a few uses, so the hot ones (Save, capture, recall) are planned once per
            # connection, not on every call. A pooler in front must support prepared
            # statements; behind one that does not, set DATABASE_PREPARED_STATEMENTS=false.
            config["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}
    else:
        raise ImproperlyConfigured("DATABASE_URL must name a postgres:// or sqlite:// database")
    if not config.get("NAME"):
        # Otherwise the first query fails, not start-up.
        raise ImproperlyConfigured("DATABASE_URL names no database (its path is empty)")
    return config


DATABASES = {"default": _database(env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "workspaces.User"

REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    if problem := service_url_problem(REDIS_URL, REDIS_SCHEMES):
        raise ImproperlyConfigured(f"REDIS_URL is not a Redis URL: {problem}")
    CACHES = {
        "default": {
            # Django's, with one client per connection pool (memory_project/cache.py).
            "BACKEND": "memory_project.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "wm"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "memory_project.cache.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes first: it refuses a locked-out sign-in before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Sign-in attempts (the web frame and /admin/): after SIGN_IN_FAILURE_LIMIT failures an
# account, and separately a client address, is locked out for SIGN_IN_LOCKOUT_MINUTES.
# Attempts are kept in the database, so a cache restart does not reset them.
AXES_FAILURE_LIMIT = env_int("SIGN_IN_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
AXES_COOLOFF_TIME = timedelta(
    minutes=env_int("SIGN_IN_LOCKOUT_MINUTES", 15, minimum=1, maximum=7 * 24 * 60)
)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "workspaces.ratelimit.client_address"
AXES_LOCKOUT_CALLABLE = "workspaces.views.sign_in_locked_out"
# Successful and failed sign-ins are recorded in the project's own audit trail.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
LOGIN_URL = "workspaces:sign-in"
LOGIN_REDIRECT_URL = "workspaces:list"
LOGOUT_REDIRECT_URL = "workspaces:sign-in"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "memory_project.staticfiles.StaticFilesStorage"},
}

# One transport limit for every request body. The 2 MiB document ceiling is a
# domain rule answered with 422; this bound sits above it so JSON escaping of a
# document at the ceiling still arrives whole and is judged by that rule.
REQUEST_MAX_BODY_BYTES = env_int("REQUEST_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=64 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_MAX_BODY_BYTES

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Scripts, styles, images and requests from this origin only (the favicon is a data: URL);
# no plugins, no framing, no <base>, and forms post back here.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# Behind TLS (gunicorn takes X-Forwarded-Proto from the proxy on FORWARDED_ALLOW_IPS): a
# positive HSTS_SECONDS sends Strict-Transport-Security on HTTPS answers and keeps the
# session and CSRF cookies off plain HTTP. Off by default: `make run` serves plain HTTP.
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 0, minimum=0, maximum=2 * 365 * 86_400)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_HSTS_SECONDS > 0

API_TOKEN_DEFAULT_TTL_DAYS = env_int("API_TOKEN_DEFAULT_TTL_DAYS", 90, minimum=1, maximum=365)
JWT_TTL_SECONDS = env_int("JWT_TTL_SECONDS", 900, minimum=30, maximum=86_400)
# Failed bearer tokens per client address and window, past which the address gets 429.
BEARER_FAILURE_LIMIT = env_int("BEARER_FAILURE_LIMIT", 30, minimum=1)
BEARER_FAILURE_WINDOW_SECONDS = env_int(
    "BEARER_FAILURE_WINDOW_SECONDS", 300, minimum=1, maximum=86_400
)
# How long a soft-deleted org waits before the nightly purge removes its data.
ORG_DELETION_GRACE_DAYS = env_int("ORG_DELETION_GRACE_DAYS", 30, minimum=0, maximum=3650)
# How long an admitted turn keeps its authority to write memory (the seed's 15 minutes).
ADMISSION_TTL_SECONDS = env_int("ADMISSION_TTL_SECONDS", 900, minimum=30, maximum=86_400)
KEY_SESSION_IDLE_SECONDS = env_int("KEY_SESSION_IDLE_SECONDS", 1800, minimum=30, maximum=86_400)
# Bounds from the memory contract: what recall may carry, and the hard ceiling of any
# document (one value for every writer).
MEMORY_RECALL_MAX_BYTES = env_int("MEMORY_RECALL_MAX_BYTES", 8192, minimum=1)
MEMORY_MAX_DOCUMENT_BYTES = env_int(
    "MEMORY_MAX_DOCUMENT_BYTES", 2 * 1024 * 1024, minimum=MEMORY_RECALL_MAX_BYTES
)
if MEMORY_MAX_DOCUMENT_BYTES * 6 + 1024 > REQUEST_MAX_BODY_BYTES:
    raise ImproperlyConfigured(
        "REQUEST_MAX_BODY_BYTES must leave room for a document at MEMORY_MAX_DOCUMENT_BYTES "
        "written as JSON (up to 6 bytes per byte when every character is escaped)"
    )
# Memory spaces (memory/spaces/): where their documents live, and the byte quotas both
# stores apply at write time (0: no cap). One quota per visibility for each space, and one
# for the sum of a team's spaces, which staff may override per team in the admin.
MEMORY_STORE = env_choice("MEMORY_STORE", "database", {"database", "filesystem"})
_MIB = 1024 * 1024
MEMORY_QUOTA_TENANT_BYTES = env_int("MEMORY_QUOTA_TENANT_BYTES", 1024 * _MIB, minimum=0)
MEMORY_QUOTA_SPACE_BYTES = {
    visibility: env_int(f"MEMORY_QUOTA_{visibility.upper()}_BYTES", default, minimum=0)
    for visibility, default in (
        ("private", 64 * _MIB),
        ("bot", 256 * _MIB),
        ("project", 256 * _MIB),
        ("cross_project", 512 * _MIB),
        ("user", 128 * _MIB),
        ("org", 1024 * _MIB),
        ("global", 1024 * _MIB),
    )
}
# How long a space write or delete waits for the space's locks before answering STORE_BUSY.
MEMORY_STORE_WAIT_SECONDS = env_int("MEMORY_STORE_WAIT_SECONDS", 5, minimum=1, maximum=300)
# A `private` space (one run's) is removed by the nightly expiry this many days after its
# last write (or its creation, if nothing was written since).
MEMORY_PRIVATE_TTL_DAYS = env_int("MEMORY_PRIVATE_TTL_DAYS", 7, minimum=1, maximum=3650)
# A line of the memory document not changed or kept on review for this many days is stale:
# the Memory frame asks whether it is still true (memory/provenance.py).
MEMORY_STALE_DAYS = env_int("MEMORY_STALE_DAYS", 90, minimum=1, maximum=3650)
# Bounds on one archive import, counted as the archive is read (so a gzip bomb stops at
# the bound instead of being inflated first): its entries, and its decompressed bytes.
MEMORY_IMPORT_MAX_ENTRIES = env_int("MEMORY_IMPORT_MAX_ENTRIES", 10_000, minimum=1)
MEMORY_IMPORT_MAX_BYTES = env_int(
    "MEMORY_IMPORT_MAX_BYTES", 64 * _MIB, minimum=MEMORY_MAX_DOCUMENT_BYTES + 64 * 1024
)
# The bodies a bot's autoload block holds at most; the documents past it are listed, not cut.
MEMORY_AUTOLOAD_MAX_BYTES = env_int("MEMORY_AUTOLOAD_MAX_BYTES", 64 * 1024, minimum=1)
# `manage.py memory --remote`'s defaults: the server it talks to and the personal access
# token it sends (never printed). Both optional; the flags override them.
MEMORY_REMOTE_URL = env_base_url("MEMORY_REMOTE_URL")
MEMORY_REMOTE_TOKEN = env_str("MEMORY_REMOTE_TOKEN", "")
# The auto-memory mirror (memory/mirror.py): the environment's level of the switch (on, off,
# true, false, 1, 0 or blank; checked at start-up by memory.apps, C131 otherwise), and where
# mirror nodes live (an absolute path; each node's files are the runtime's to edit).
AUTO_MEMORY = env_str("AUTO_MEMORY", "")
AUTO_MEMORY_STATE_DIR = Path(env_str("AUTO_MEMORY_STATE_DIR", str(DATA_DIR / "state")))
if not AUTO_MEMORY_STATE_DIR.is_absolute():
    raise ImproperlyConfigured("AUTO_MEMORY_STATE_DIR must be an absolute path")
if AUTO_MEMORY_STATE_DIR.exists() and not AUTO_MEMORY_STATE_DIR.is_dir():
    raise ImproperlyConfigured("AUTO_MEMORY_STATE_DIR names something that is not a directory")
# One document search decrypts at most this many bytes before it answers with a cursor to
# continue from, and one person runs at most this many searches at once.
SEARCH_MAX_DECRYPTED_BYTES = env_int(
    "SEARCH_MAX_DECRYPTED_BYTES", 8 * 1024 * 1024, minimum=MEMORY_MAX_DOCUMENT_BYTES
)
SEARCH_CONCURRENCY_PER_USER = env_int("SEARCH_CONCURRENCY_PER_USER", 2, minimum=1, maximum=64)
# The model behind the assistant: `scripted` (deterministic, offline, the default) or any
# OpenAI-compatible chat-completions endpoint.
MODEL_PROVIDER = env_choice("MODEL_PROVIDER", "scripted", {"scripted", "openai"})
# Checked like MEMORY_REMOTE_URL: a malformed one would fail only the first turn.
OPENAI_BASE_URL = env_base_url("OPENAI_BASE_URL")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
OPENAI_MODEL = env_str("OPENAI_MODEL", "")
if MODEL_PROVIDER == "openai" and not (OPENAI_BASE_URL and OPENAI_MODEL):
    raise ImproperlyConfigured("MODEL_PROVIDER=openai needs OPENAI_BASE_URL and OPENAI_MODEL")
JWT_SIGNING_KEY = env_signing_key(
    "JWT_SIGNING_KEY", hashlib.sha256(f"jwt-signing:{SECRET_KEY}".encode()).hexdigest()
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "workspaces.authentication.BearerAuthentication",
        "workspaces.authentication.TeamSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["memory_project.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["memory_project.api.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "memory_project.api.negotiation.ContentNegotiation",
    "DEFAULT_THROTTLE_CLASSES": ["memory_project.api.throttles.RequestRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "credential": env_rate("THROTTLE_CREDENTIAL_RATE", "1200/min"),
        "write": env_rate("THROTTLE_WRITE_RATE", "300/min"),
    },
    # How many proxies in front of the app append to X-Forwarded-For; 0 trusts none and
    # uses REMOTE_ADDR, so a client cannot pick its own address for the limits.
    "NUM_PROXIES": env_int("NUM_PROXIES", 0, minimum=0, maximum=10),
    "EXCEPTION_HANDLER": "memory_project.api.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "memory_project.api.schema.QualifiedAutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Workspace Memory API",
    "DESCRIPTION": (
        "A small, lasting, human-editable memory per workspace for an AI assistant, "
        "and the rules for who may change it and when. Errors have the shape "
        '{"error": {"code", "message", "detail"}}; docs/errors.md lists every code.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "DEFAULT_GENERATOR_CLASS": "memory_project.api.schema.SerialSchemaGenerator",
    # The API's ids (memory_project.api.converters): whole numbers, in the one spelling.
    "PATH_CONVERTER_OVERRIDES": {"id": int},
    # One name per choice set that several fields share, so a generated client has one enum.
    "ENUM_NAME_OVERRIDES": {
        "TurnState": "automation.models.TurnState",
        "MemoryMode": "memory.models.MemoryMode",
        "ChangeKind": "workspaces.models.ChangeKind",
        "AuthorKind": "workspaces.models.AuthorKind",
        "TokenScope": "workspaces.models.TokenScope",
        # What a person may mint on the token route: every scope but a bot's.
        "PersonTokenScope": ["api", "mcp"],
        "WorkspaceRole": "workspaces.models.WorkspaceRole",
        "MessageRole": "automation.models.MessageRole",
        "RecallStatus": "automation.models.RecallStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memory_project.api.schema.declare_error_responses",
    ],
}

# Without a broker, tasks run in the calling process: the embedded default needs no
# worker, and the same code paths run as in production.
_broker_url = env_str("CELERY_BROKER_URL", "").strip()
if _broker_url and (problem := service_url_problem(_broker_url, BROKER_SCHEMES)):
    raise ImproperlyConfigured(f"CELERY_BROKER_URL is not a broker URL: {problem}")
CELERY_TASK_ALWAYS_EAGER = not _broker_url
# The in-memory transport with its host named, as kombu otherwise warns on first use.
CELERY_BROKER_URL = _broker_url or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR"})
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {
        "no_query_strings": {"()": "memory_project.log_filters.RedactQueryStrings"},
        "conflicts_as_info": {"()": "memory_project.log_filters.ConflictsAsInfo"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # runserver's request lines, which carry the query string (gunicorn's access log:
    # memory_project/gunicorn_conf.py).
    "loggers": {
        "django.request": {"filters": ["conflicts_as_info"]},
        "django.server": {
            "handlers": ["console"],
            "filters": ["no_query_strings"],
            "propagate": False,
        },
    },
}
