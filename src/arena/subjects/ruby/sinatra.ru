# The subject workload as a Sinatra app: one Sinatra route per endpoint. Contract: ../spec.md.
require "sinatra/base"
require_relative "workload"

class ArenaSinatra < Sinatra::Base
  set :environment, :production
  set :logging, false
  set :show_exceptions, false

  def serve
    status, hdrs, body = ArenaWorkload.handle(request.path_info, request.query_string,
                                              request.env["HTTP_X_REQUEST_START"], "sinatra")
    [status, hdrs, body]
  end

  (ArenaWorkload::ENDPOINTS + ["mix"]).each do |name|
    %i[get post put delete patch].each { |verb| send(verb, "/#{name}") { serve } }
  end

  not_found { serve }
end

run ArenaSinatra
