Blog.routes.draw do
  get "/up", to: "posts#up"
  # the new-post form and its submission, checked against the session's CSRF token
  get "/posts/new", to: "posts#new"
  post "/posts/new", to: "posts#publish"
  resources :posts, only: %i[index show create]
  root to: "posts#index"
end
