class Post < ApplicationRecord
  belongs_to :author
  validates :title, :body, presence: true

  def as_json(*)
    { id: id, title: title, body: body, created_at: created_at, author: { id: author.id, name: author.name } }
  end
end
