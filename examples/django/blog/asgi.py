import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blog.settings")
application = get_asgi_application()

from blog.seed import seed  # noqa: E402 (after Django is set up)

seed()
