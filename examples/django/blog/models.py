from django.db import models


class Author(models.Model):
    name = models.TextField()
    bio = models.TextField()

    class Meta:
        db_table = "authors"  # the example's schema (../schema.sql), shared with the Rails example
        managed = False


class Post(models.Model):
    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="posts")
    title = models.TextField()
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "posts"
        managed = False

    def as_json(self) -> dict:
        return {"id": self.id, "title": self.title, "body": self.body, "created_at": self.created_at.isoformat(),
                "author": {"id": self.author.id, "name": self.author.name}}
