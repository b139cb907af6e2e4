# A small Rails 6.1 blog (Debian's ruby-rails, ActiveRecord on PostgreSQL through ruby-pg): authors and
# their posts, listed, shown and created, as HTML and JSON. Run by Arena against its managed PostgreSQL
# (PGHOST, PGPORT, PGDATABASE, PGUSER; the pool from ARENA_POOL): see experiment.toml.
require_relative "config/application"

Blog.initialize!
Blog.seed!
run Blog
