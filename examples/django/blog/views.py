from django.db import connection
from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import csrf_exempt

from blog.models import Post

PER_PAGE = 20


def wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def up(request):
    with connection.cursor() as c:
        c.execute("SELECT 1")
    return HttpResponse(status=200)


@csrf_exempt  # a load test posts without a form's token
def posts(request):
    if request.method == "POST":
        return create(request)
    try:
        page = max(int(request.GET.get("page", 1)), 1)
    except ValueError:
        page = 1
    listed = list(Post.objects.select_related("author").order_by("-id")[(page - 1) * PER_PAGE:page * PER_PAGE])
    if wants_json(request):
        return JsonResponse([p.as_json() for p in listed], safe=False)
    return render(request, "blog/index.html", {"posts": listed})


def show(request, post_id: int):
    post = get_object_or_404(Post.objects.select_related("author"), pk=post_id)
    if wants_json(request):
        return JsonResponse(post.as_json())
    return render(request, "blog/show.html", {"post": post})


def new_post(request):
    """The new-post form (GET) and its submission (POST), which Django's CSRF middleware checks: the
    form's csrfmiddlewaretoken against the csrftoken cookie set with the form."""
    if request.method == "POST":
        return create(request)
    return render(request, "blog/new.html")


def create(request):
    data = request.POST
    if not data.get("title") or not data.get("body") or not data.get("author_id", "").isdigit():
        return HttpResponse("title, body and author_id are required", status=422)
    post = Post.objects.create(author_id=int(data["author_id"]), title=data["title"], body=data["body"])
    if wants_json(request):
        return JsonResponse(Post.objects.select_related("author").get(pk=post.pk).as_json(), status=201)
    response = HttpResponseRedirect(f"/posts/{post.pk}")
    response.status_code = 303
    return response
