from django.urls import path

from blog import views

urlpatterns = [
    path("up", views.up),
    path("", views.posts),
    path("posts", views.posts),
    path("posts/new", views.new_post),
    path("posts/<int:post_id>", views.show),
]
