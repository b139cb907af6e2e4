"""The Django example's settings: production-like (no debug), Arena's managed PostgreSQL through
libpq's variables, Django's connection pool per process."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "an-example-app-has-no-secrets"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.contenttypes", "blog"]
# CSRF: the new-post form (/posts/new) carries Django's token, checked against its csrftoken cookie
MIDDLEWARE = ["blog.timing.ServerTiming", "django.middleware.common.CommonMiddleware",
              "django.middleware.csrf.CsrfViewMiddleware"]
ROOT_URLCONF = "blog.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "OPTIONS": {"debug": False}}]
WSGI_APPLICATION = "blog.wsgi.application"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["console"], "level": "WARNING"}}

# Django's own pool (psycopg_pool), per process: ARENA_POOL connections (Arena sets it to the threads
# per process), else 4. Not persistent per-thread connections: under an ASGI server Django runs sync
# views on threads it does not keep, and each would hold its own connection until PostgreSQL refuses.
POOL = int(os.environ.get("ARENA_POOL", "4"))
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
        "NAME": os.environ.get("PGDATABASE", "arena"),
        "USER": os.environ.get("PGUSER", ""),
        "CONN_MAX_AGE": 0,
        "OPTIONS": {"pool": {"min_size": 1, "max_size": POOL, "timeout": 5}},
    }
}
