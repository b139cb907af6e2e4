# No forgery protection: without load_defaults, Rails 6.1 does not turn it on (a load test posts
# without a form's token).
class ApplicationController < ActionController::Base
end
