# No forgery protection by default: without load_defaults, Rails 6.1 does not turn it on (a load
# test posts without a form's token). PostsController turns it on for the new-post form only.
class ApplicationController < ActionController::Base
end
