Blog.routes.draw do
  get "/up", to: "posts#up"
  resources :posts, only: %i[index show create]
  root to: "posts#index"
end
