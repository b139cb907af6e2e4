-- The example apps' data (examples/rails and examples/django serve the same): 100 authors and
-- 10,000 posts, each post by one author, the same rows every time. Idempotent: each app runs it at
-- boot under an advisory lock, so several workers may.
CREATE TABLE IF NOT EXISTS authors (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    bio text NOT NULL
);
CREATE TABLE IF NOT EXISTS posts (
    id bigserial PRIMARY KEY,
    author_id bigint NOT NULL REFERENCES authors (id),
    title text NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS posts_author_id ON posts (author_id);
INSERT INTO authors (id, name, bio)
    SELECT i, 'Author ' || i, repeat('Writes about servers and queues. ', 4)
    FROM generate_series(1, 100) AS i
    WHERE NOT EXISTS (SELECT 1 FROM authors);
INSERT INTO posts (id, author_id, title, body, created_at)
    SELECT i, 1 + i % 100, 'Post number ' || i, repeat('Lorem ipsum dolor sit amet, consectetur adipiscing. ', 12),
           timestamptz '2026-01-01 00:00:00+00' + i * interval '1 minute'
    FROM generate_series(1, 10000) AS i
    WHERE NOT EXISTS (SELECT 1 FROM posts);
SELECT setval('posts_id_seq', (SELECT max(id) FROM posts));
ANALYZE authors;
ANALYZE posts;
