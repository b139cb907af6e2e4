# The subject workload shared by the Rack, Sinatra and Rails apps. Contract: ../spec.md.
# It mirrors ../python/workload.py: same parameters, bounds, messages, bodies and timings.

require "json"
require "uri"
require_relative "../wrap/arena_timing" # ArenaClocks: the clocks its timing shares with a user app's

module ArenaWorkload
  ENDPOINTS = %w[work fib pi sort json sleep db api leak server health stream].freeze
  MIX_ENDPOINTS = (ENDPOINTS - ["stream"]).freeze # every endpoint but /stream (one answer each) can be drawn by /mix
  DISTRIBUTIONS = %w[fixed exp lognormal uniform].freeze
  INTEGER = /\A-?[0-9]+\z/
  LEAK_BOUND_KB = 1024 * 1024 # what /leak keeps at most in one process: 1 GiB
  NUMBER = /\A-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\z/

  class BadRequest < StandardError
    def status = 400
  end

  class NotFound < BadRequest
    def status = 404
  end

  # A service the request needs is missing, or no pooled connection came in time.
  class Unavailable < BadRequest
    def status = 503
  end

  # The downstream service failed.
  class BadGateway < BadRequest
    def status = 502
  end

  # /leak would keep more than its bound.
  class InsufficientStorage < BadRequest
    def status = 507
  end

  # One query parameter: kind ("number", "integer" or "word"), default, bounds or words.
  Param = Struct.new(:kind, :default, :lo, :hi, :words) do
    def allowed
      return words.map { |w| "'#{w}'" }.join(" or ") if kind == "word"
      "a#{kind == 'integer' ? 'n' : ''} #{kind} from #{ArenaWorkload.fmt(lo)} to #{ArenaWorkload.fmt(hi)}"
    end

    def parse(name, raw)
      problem = "#{name}: must be #{allowed}, got '#{raw}'"
      if kind == "word"
        raise BadRequest, problem unless words.include?(raw)
        return raw
      end
      raise BadRequest, problem unless (kind == "integer" ? INTEGER : NUMBER).match?(raw)
      value = kind == "integer" ? Integer(raw, 10) : Float(raw)
      raise BadRequest, problem unless value >= lo && value <= hi
      value
    end
  end

  def self.num(default, lo, hi) = Param.new("number", default, lo, hi, nil)
  def self.int(default, lo, hi) = Param.new("integer", default, lo, hi, nil)
  def self.word(default, words) = Param.new("word", default, nil, nil, words)

  PARAMS = {
    "work" => {
      "cpu_ms" => num(0, 0, 10_000), "io_ms" => num(0, 0, 60_000), "io_min_ms" => num(0, 0, 60_000),
      "bytes" => int(0, 0, 10 * 1024 * 1024), "io" => word("sleep", %w[sleep block]),
      "cpu_dist" => word("fixed", DISTRIBUTIONS), "io_dist" => word("fixed", DISTRIBUTIONS),
      "sigma" => num(1.0, 0, 4)
    },
    "fib" => { "n" => int(1000, 0, 100_000) },
    "pi" => { "digits" => int(100, 1, 10_000) },
    "sort" => { "n" => int(1000, 0, 1_000_000) },
    "json" => { "min" => int(10, 0, 100_000), "max" => int(100, 0, 100_000) },
    "sleep" => { "ms" => num(0, 0, 60_000) },
    "db" => { "q" => word("point", %w[point range write sleep]), "rows" => int(10, 1, 10_000), "ms" => num(10, 0, 60_000) },
    "api" => { "ms" => num(10, 0, 60_000), "bytes" => int(100, 0, 10 * 1024 * 1024) },
    "leak" => { "kb" => int(0, 0, LEAK_BOUND_KB), "reset" => word("0", %w[0 1]) },
    "server" => {},
    "health" => {},
    "stream" => {
      "events" => int(10, 1, 100_000), "interval_ms" => num(50, 0, 60_000), "first_ms" => num(0, 0, 60_000),
      "cpu_ms" => num(0, 0, 10_000), "bytes" => int(16, 0, 65_536), "buffering" => word("yes", %w[yes no])
    }
  }.freeze
  WEIGHT = num(0, 0, 1_000_000)
  SEED = int(nil, 0, 2**63 - 1)

  def self.fmt(x) = (x.to_f == x.to_i ? x.to_i.to_s : x.to_s)

  # ---------------------------------------------------------------- parameters

  def self.parse_query(query)
    out = {}
    (query || "").split("&").each do |pair|
      next if pair.empty?
      k, v = pair.split("=", 2)
      out[unescape(k)] = unescape(v || "")
    end
    out
  end

  def self.unescape(s)
    URI.decode_www_form_component(s)
  rescue ArgumentError
    s
  end

  def self.endpoint_args(endpoint, query, prefixed: false)
    spec = PARAMS[endpoint]
    raw = {}
    labels = {}
    query.each do |name, value|
      if spec.key?(name)
        raw[name] = value unless raw.key?(name)
        labels[name] = name
      elsif !prefixed
        raise BadRequest, "#{name}: unknown parameter for /#{endpoint} (allowed: #{names(spec)})"
      end
    end
    if prefixed
      spec.each_key do |name|
        key = "#{endpoint}.#{name}"
        next unless query.key?(key)
        raw[name] = query[key]
        labels[name] = key
      end
    end
    args = spec.transform_values(&:default)
    raw.each { |name, value| args[name] = spec[name].parse(labels[name], value) }
    if endpoint == "json" && args["min"] > args["max"]
      raise BadRequest, "min: must be <= max (#{args['max']}), got '#{args['min']}'"
    end
    args
  end

  def self.names(spec) = spec.empty? ? "none" : spec.keys.join(", ")

  def self.mix_args(query)
    weights = {}
    seed = nil
    query.each do |name, value|
      if name.start_with?("w_")
        unless MIX_ENDPOINTS.include?(name[2..])
          raise BadRequest, "#{name}: unknown endpoint weight (allowed: w_#{MIX_ENDPOINTS.join(', w_')})"
        end
        weights[name[2..]] = WEIGHT.parse(name, value)
      elsif name == "seed"
        seed = SEED.parse(name, value)
      else
        endpoint, dot, param = name.partition(".")
        known = if dot.empty? then MIX_ENDPOINTS.any? { |e| PARAMS[e].key?(name) }
                else MIX_ENDPOINTS.include?(endpoint) && PARAMS[endpoint].key?(param)
                end
        unless known
          raise BadRequest, "#{name}: unknown parameter for /mix (allowed: w_<endpoint>, seed, " \
                            "and the endpoints' parameters, plain or as <endpoint>.<name>)"
        end
      end
    end
    raise BadRequest, "w_*: at least one endpoint weight must be above 0, got none" unless weights.values.any?(&:positive?)
    [weights, seed]
  end

  # ---------------------------------------------------------------- random streams

  UNSEEDED = Random.new
  SEEDED = {}
  SEEDED_LOCK = Mutex.new

  def self.rng_for(seed)
    return UNSEEDED if seed.nil?
    SEEDED_LOCK.synchronize { SEEDED[seed] ||= Random.new(seed) }
  end

  def self.choose(weights, rng)
    names = MIX_ENDPOINTS.select { |e| weights.fetch(e, 0).positive? }
    x = rng.rand * names.sum { |e| weights[e] }
    names.each do |e|
      x -= weights[e]
      return e if x < 0
    end
    names.last
  end

  def self.sample(mean, dist, sigma, hi, rng)
    value =
      if mean <= 0 || dist == "fixed" then mean
      elsif dist == "exp" then -mean * Math.log(1.0 - rng.rand)
      elsif dist == "uniform" then 2.0 * mean * rng.rand
      else # lognormal with E[X] = mean: mu = ln(mean) - sigma^2 / 2 (Box-Muller normal)
        normal = Math.sqrt(-2.0 * Math.log(1.0 - rng.rand)) * Math.cos(2 * Math::PI * rng.rand)
        Math.exp(Math.log(mean) - sigma * sigma / 2 + sigma * normal)
      end
    [value, hi].min
  end

  # ---------------------------------------------------------------- the work

  def self.thread_cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  def self.gc_s = ArenaClocks.gc_s
  def self.throttled_s = ArenaClocks.throttled_s
  def self.mono = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def self.burn_cpu(seconds)
    stop = thread_cpu + seconds
    x = 0
    while thread_cpu < stop
      100.times { |i| x += i * i } # a few µs between clock reads keeps the overshoot small
    end
    x
  end

  def self.fib(n)
    a, b = 0, 1
    n.times { a, b = b, a + b }
    a
  end

  def self.arctan_inv(x, unity)
    total = term = unity / x
    x2, k, sign = x * x, 3, -1
    until term.zero?
      term /= x2
      total += sign * (term / k)
      sign, k = -sign, k + 2
    end
    total
  end

  def self.pi_digits(digits)
    guard = 10
    unity = 10**(digits + guard)
    text = ((4 * (4 * arctan_inv(5, unity) - arctan_inv(239, unity))) / 10**guard).to_s
    "#{text[0]}.#{text[1..]}"
  end

  def self.json_doc(size, rng)
    (0...size).to_h { |i| ["item#{i}", { "id" => i, "name" => "item-#{i}", "score" => rng.rand, "tags" => %w[a b c] }] }
  end

  def self.thread_id = Thread.current.respond_to?(:native_thread_id) ? Thread.current.native_thread_id : Thread.current.object_id

  def self.server_info(app_kind)
    { "server" => ENV.fetch("ARENA_SERVER", "unknown"), "pid" => Process.pid, "thread" => thread_id,
      "app" => app_kind, "language" => "ruby", "interpreter" => "#{RUBY_ENGINE} #{RUBY_VERSION}" }
  end

  # What /leak keeps, for the process's life or until /leak?reset=1.
  @kept = []
  @kept_kb = 0
  @kept_lock = Mutex.new

  # /leak: keeps kb KiB more in this process, written so that they are resident, or lets go of
  # everything kept with reset (spec: /leak).
  def self.leak(kb, reset)
    @kept_lock.synchronize do
      if reset
        @kept.clear
        @kept_kb = 0
      elsif @kept_kb + kb > LEAK_BOUND_KB
        raise InsufficientStorage, "leak: keeping #{kb} KiB more would pass the bound of #{LEAK_BOUND_KB} KiB kept " \
                                   "per process (#{@kept_kb} KiB kept; /leak?reset=1 lets go of them)"
      elsif kb.positive?
        @kept << ("\xa5".b * (kb * 1024))
        @kept_kb += kb
      end
      { "kept_kb" => @kept_kb, "pid" => Process.pid }
    end
  end

  # Runs the CPU phase; returns [body, content type, I/O seconds to wait, cpu, cpuwall].
  def self.compute(endpoint, args, rng, app_kind)
    wall0 = mono
    cpu0 = thread_cpu
    io_s = 0.0
    type = "application/json"
    body =
      case endpoint
      when "work"
        cpu_ms = sample(args["cpu_ms"], args["cpu_dist"], args["sigma"], 10_000, rng)
        io_s = [args["io_min_ms"] + sample(args["io_ms"], args["io_dist"], args["sigma"], 60_000, rng), 60_000].min / 1000.0
        burn_cpu(cpu_ms / 1000.0)
        type = "text/plain"
        "x" * args["bytes"]
      when "fib"
        f = fib(args["n"])
        JSON.generate({ "n" => args["n"], "bits" => f.bit_length, "mod1e9" => f % 10**9 })
      when "pi"
        type = "text/plain"
        pi_digits(args["digits"])
      when "sort"
        values = Array.new(args["n"]) { rng.rand(2**31) }.sort
        JSON.generate({ "n" => args["n"], "min" => values.first, "max" => values.last })
      when "json" then JSON.generate(json_doc(rng.rand(args["min"]..args["max"]), rng))
      when "sleep"
        io_s = args["ms"] / 1000.0
        type = "text/plain"
        ""
      when "leak" then JSON.generate(leak(args["kb"], args["reset"] == "1"))
      when "server" then JSON.generate(server_info(app_kind))
      else
        type = "text/plain"
        "ok"
      end
    [body, type, io_s, thread_cpu - cpu0, mono - wall0]
  end

  def self.parse_request_start(value)
    text = value.strip.delete_prefix("t=")
    return Float(text) if /\A[0-9]+\.[0-9]+\z/.match?(text)
    if /\A[0-9]+\z/.match?(text)
      n = Integer(text, 10)
      return n >= 10**15 ? n / 1e6 : n >= 10**12 ? n / 1e3 : n.to_f
    end
    raise BadRequest, "X-Request-Start: must be t=<microseconds since the epoch>, got '#{value}'"
  end

  def self.ms(seconds) = format("%.3f", seconds * 1000)

  # ---------------------------------------------------------------- database and downstream calls
  # Per process (created on first use, so a forking server's workers never share a socket): a
  # ConnectionPool of ruby-pg connections of ARENA_POOL (default 5) waiting up to ARENA_POOL_TIMEOUT
  # seconds (default 5), configured by libpq's PG* variables; and a kept-alive Net::HTTP connection
  # to ARENA_API_URL per thread.

  DB_COLUMNS = %w[id category name price].freeze
  POOL_SIZE = Integer(ENV.fetch("ARENA_POOL", "5"))
  POOL_TIMEOUT = Float(ENV.fetch("ARENA_POOL_TIMEOUT", "5"))
  @pools = {}
  @pools_lock = Mutex.new

  def self.db_pool
    @pools_lock.synchronize do
      @pools[Process.pid] ||= begin
        require "pg"
        require "connection_pool"
        ConnectionPool.new(size: POOL_SIZE, timeout: POOL_TIMEOUT) do
          if ENV["PGHOST"]
            PG.connect(host: ENV["PGHOST"], port: ENV["PGPORT"], dbname: ENV["PGDATABASE"], user: ENV["PGUSER"])
          else
            PG.connect(ENV.fetch("ARENA_DATABASE_URL"))
          end
        end
      end
    end
  end

  def self.db_rows = Integer(ENV.fetch("ARENA_DB_ROWS", "10000"))

  # Returns [rows, pool wait, query time] for /db?q=... (spec: /db).
  def self.db(args, rng)
    unless ENV["PGHOST"] || ENV["ARENA_DATABASE_URL"]
      raise Unavailable, 'db: no database service (start one: [[services]] kind = "postgres", or arena serve --service postgres)'
    end
    n = db_rows
    key = rng.rand(1..n)
    sql, params = case args["q"]
                  when "point" then ["SELECT id, category, name, price::float FROM items WHERE id = $1", [key]]
                  when "range"
                    first = rng.rand(1..[1, n - args["rows"] + 1].max)
                    ["SELECT id, category, name, price::float FROM items WHERE id BETWEEN $1 AND $2 ORDER BY id",
                     [first, first + args["rows"] - 1]]
                  when "write"
                    ["UPDATE items SET price = price + 0.01 WHERE id = $1 RETURNING id, category, name, price::float", [key]]
                  else ["SELECT pg_sleep($1)", [args["ms"] / 1000.0]]
                  end
    pool = db_pool # loads pg and connection_pool: the rescue clauses below name their errors
    t0 = mono
    pool_s = db_s = 0.0
    begin
      rows = pool.with do |conn|
        pool_s = mono - t0
        t1 = mono
        result = conn.exec_params(sql, params)
        out = args["q"] == "sleep" ? [] : result.values
        db_s = mono - t1
        out
      end
    rescue ConnectionPool::TimeoutError
      raise Unavailable, "db: no pooled connection within #{fmt(POOL_TIMEOUT)} s (pool of #{POOL_SIZE} per process)"
    rescue PG::Error => e
      raise Unavailable, "db: #{e.message.strip.lines.first&.strip}"
    end
    [rows.map { |row| DB_COLUMNS.zip([Integer(row[0]), Integer(row[1]), row[2], Float(row[3])]).to_h }, pool_s, db_s]
  end

  # Returns [status, body length, seconds] of the downstream /work call of /api (spec: /api).
  def self.api(args)
    base = ENV["ARENA_API_URL"]
    raise Unavailable, 'api: no downstream service (start one: [[services]] kind = "http", or arena serve --service http)' unless base
    require "net/http"
    target = "/work?io_ms=#{fmt(args['ms'])}&io_dist=#{ENV.fetch('ARENA_API_DIST', 'fixed')}" \
             "&sigma=#{ENV.fetch('ARENA_API_SIGMA', '1')}&bytes=#{args['bytes']}"
    2.times do |attempt| # a kept-alive connection the service closed is opened again, once
      http = (Thread.current[:arena_api] ||= begin
        uri = URI(base)
        Net::HTTP.new(uri.host, uri.port).tap { |h| h.keep_alive_timeout = 60; h.read_timeout = 120; h.start }
      end)
      t0 = mono
      begin
        resp = http.request(Net::HTTP::Get.new(target))
        return [Integer(resp.code), (resp.body || "").bytesize, mono - t0]
      rescue StandardError => e
        http.finish if http.started?
        Thread.current[:arena_api] = nil
        raise BadGateway, "api: #{e.class}: #{e.message}" if attempt == 1
      end
    end
  end

  def self.phase_timing(app, cpu, cpuwall, io)
    ["app;dur=#{ms(app)}", "cpu;dur=#{ms(cpu)}", "cpuwall;dur=#{ms(cpuwall)}", "io;dur=#{ms(io)}"]
  end

  # The whole wait, even if the thread is woken early (Thread#wakeup ends a sleep).
  def self.wait(seconds)
    t0 = mono
    while (left = t0 + seconds - mono).positive?
      sleep(left)
    end
    mono - t0
  end

  # /stream's body (spec: /stream): each part yielded to the server as it is made, the waits slept
  # between them; the opening comment, the events, the closing comment with the stream's timing.
  class StreamBody
    def initialize(args, start)
      @args = args
      @start = start
    end

    def each
      cpu = cpuwall = io = 0.0
      payload = "x" * @args["bytes"]
      yield ": stream\n\n"
      (1..@args["events"]).each do |i|
        wait_s = (i == 1 ? @args["first_ms"] : @args["interval_ms"]) / 1000.0
        io += ArenaWorkload.wait(wait_s) if wait_s.positive?
        wall0 = ArenaWorkload.mono
        cpu0 = ArenaWorkload.thread_cpu
        ArenaWorkload.burn_cpu(@args["cpu_ms"] / 1000.0)
        cpu += ArenaWorkload.thread_cpu - cpu0
        cpuwall += ArenaWorkload.mono - wall0
        yield "id: #{i}\ndata: #{payload}\n\n"
      end
      timing = ArenaWorkload.phase_timing(ArenaWorkload.mono - @start, cpu, cpuwall, io).join(", ")
      yield ": server-timing #{timing}\n\n"
    end
  end

  # Whether a /stream request is one the contract streams (else it is a 400).
  def self.streamable?(query, request_start)
    parse_request_start(request_start) unless request_start.nil?
    endpoint_args("stream", parse_query(query))
    true
  rescue BadRequest
    false
  end

  # /stream's head (what is known when it leaves: the queue) and its body.
  def self.stream(args, start, queue)
    headers = { "Content-Type" => "text/event-stream", "Cache-Control" => "no-cache" }
    headers["X-Accel-Buffering"] = "no" if args["buffering"] == "no"
    headers["Server-Timing"] = "queue;dur=#{ms([queue, 0.0].max)}" unless queue.nil?
    headers.merge!("X-Arena-Pid" => Process.pid.to_s, "X-Arena-Thread" => thread_id.to_s, "X-Arena-Endpoint" => "stream")
    [200, headers, StreamBody.new(args, start)]
  end

  # Serves one request: returns [status, headers, body] (body a String, or a StreamBody for
  # /stream). The waits are Ruby's sleep, which releases
  # the GVL; no Ruby server here runs the app in an event loop, so io=block is the same wait.
  def self.handle(path, query, request_start, app_kind)
    start_wall = Time.now.to_f
    start = mono
    gc0 = gc_s
    held0 = throttled_s
    cpu = cpuwall = io = 0.0
    extra = []
    endpoint = path.delete_prefix("/").delete_suffix("/")
    endpoint = "/" if endpoint.empty?
    queue = nil
    begin
      queue = start_wall - parse_request_start(request_start) unless request_start.nil?
      unless PARAMS.key?(endpoint) || endpoint == "mix"
        raise NotFound, "unknown path #{path} (endpoints: /#{ENDPOINTS.join(', /')}, /mix)"
      end
      params = parse_query(query)
      rng = UNSEEDED
      if endpoint == "mix"
        weights, seed = mix_args(params)
        rng = rng_for(seed)
        endpoint = choose(weights, rng)
        args = endpoint_args(endpoint, params, prefixed: true)
      else
        args = endpoint_args(endpoint, params)
      end
      return stream(args, start, queue) if endpoint == "stream"
      if endpoint == "db"
        t0 = mono
        rows, pool_s, db_s = db(args, rng)
        io = mono - t0
        extra << "pool;dur=#{ms(pool_s)}" << "db;dur=#{ms(db_s)}"
        body, type, io_s = JSON.generate(rows), "application/json", 0.0
      elsif endpoint == "api"
        t0 = mono
        down, size, api_s = api(args)
        io = mono - t0
        extra << "api;dur=#{ms(api_s)}"
        raise BadGateway, "api: the downstream service answered #{down}" unless down == 200
        body, type, io_s = JSON.generate({ "status" => down, "bytes" => size }), "application/json", 0.0
      else
        body, type, io_s, cpu, cpuwall = compute(endpoint, args, rng, app_kind)
      end
      io = wait(io_s) if io_s.positive?
      status = 200
    rescue BadRequest => e
      status = e.status
      body = "#{e.message}\n"
      type = "text/plain"
    end
    timing = []
    timing << "queue;dur=#{ms([queue, 0.0].max)}" unless queue.nil?
    timing.concat(phase_timing(mono - start, cpu, cpuwall, io))
    timing.concat(extra)
    in_gc = gc_s - gc0
    timing << "gc;dur=#{ms(in_gc)}" if in_gc.positive? # only a request that met a collection says so
    held = [throttled_s - held0, mono - start].min
    timing << "throttled;dur=#{ms(held)}" if held.positive? # only a request that met the quota's throttling
    headers = {
      "Content-Type" => type, "Content-Length" => body.bytesize.to_s, "Server-Timing" => timing.join(", "),
      "X-Arena-Pid" => Process.pid.to_s, "X-Arena-Thread" => thread_id.to_s,
      "X-Arena-Endpoint" => status == 200 ? endpoint : "none"
    }
    [status, headers, body]
  end

  # The Rack entry point shared by the front ends that see a Rack env.
  def self.call_rack(env, app_kind)
    handle(env["PATH_INFO"] || "/", env["QUERY_STRING"], env["HTTP_X_REQUEST_START"], app_kind)
  end
end
