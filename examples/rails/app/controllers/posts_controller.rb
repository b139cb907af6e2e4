class PostsController < ApplicationController
  PER_PAGE = 20
  # the form's submission only: its authenticity_token against the one in the session cookie
  protect_from_forgery with: :exception, only: :publish

  def up
    ActiveRecord::Base.connection.select_value("SELECT 1")
    head :ok
  end

  def index
    page = [params.fetch(:page, 1).to_i, 1].max
    @posts = Post.includes(:author).order(id: :desc).limit(PER_PAGE).offset((page - 1) * PER_PAGE)
    respond_to do |format|
      format.html
      format.json { render json: @posts }
    end
  end

  def show
    @post = Post.includes(:author).find(params[:id])
    respond_to do |format|
      format.html
      format.json { render json: @post }
    end
  end

  def new; end

  def publish
    post = Post.create!(params.permit(:author_id, :title, :body))
    redirect_to post_path(post), status: :see_other
  rescue ActiveRecord::RecordInvalid, ActiveRecord::InvalidForeignKey => e
    render plain: e.message, status: :unprocessable_entity
  end

  def create
    post = Post.create!(params.permit(:author_id, :title, :body))
    respond_to do |format|
      format.html { redirect_to post_path(post), status: :see_other }
      format.json { render json: post, status: :created }
    end
  rescue ActiveRecord::RecordInvalid, ActiveRecord::InvalidForeignKey => e
    render plain: e.message, status: :unprocessable_entity
  end
end
