import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blog.settings")
application = get_wsgi_application()

from blog.seed import seed  # noqa: E402 (after Django is set up)

seed()
