# Arena's timing around a user's Rack app: placed first, it adds to every response
#
# - Server-Timing: queue (from X-Request-Start to the middleware's start), app (the whole handler,
#   body included), cpu (the thread's CPU time over the request) and cpuwall (the time the thread was
#   running or ready to run: its CPU time plus its wait for a core, from /proc/thread-self/schedstat).
#   So cpuwall - cpu is the wait for a core; a thread's wait for the GVL is off-CPU like I/O and stays
#   in app - cpuwall; and gc, the process's time in the garbage collector while the request was in
#   flight (GC.total_time, Ruby 3.1), where a collection ran. The app's own Server-Timing metrics are
#   kept (the names queue, app, cpu, cpuwall and gc are Arena's).
# - X-Arena-Pid and X-Arena-Thread.
#
# A response the app gives whole (an Array body, one that answers to_ary, or a Content-Length) is
# collected before it goes out, so the timing covers its body. A stream (a lazy body without
# Content-Length: an Enumerator of server-sent events, Sinatra's stream) passes through as the app
# yields it: its head carries queue and start (the middleware's start to the app's return), its end
# is the client's to measure. Loaded by the config.ru Arena writes for a user's app (ArenaTiming.rackup).
# The process-wide clocks a request's timing reads before and after it (Arena's Ruby subject too).
module ArenaClocks
  # The process's time in the garbage collector so far (a collection holds the GVL: every thread of
  # the process waits for it); 0 where this Ruby does not count it (before 3.1).
  def self.gc_s = GC.respond_to?(:total_time) ? GC.total_time / 1e9 : 0.0

  # Under a CPU quota, the server's cgroup's throttled time so far (the cpu.stat Arena names in
  # ARENA_CPU_STAT: v1's throttled_time in ns, v2's throttled_usec), re-read in place; 0 without.
  CPU_STAT = (File.open(ENV["ARENA_CPU_STAT"]) if ENV["ARENA_CPU_STAT"] && File.readable?(ENV["ARENA_CPU_STAT"]))

  def self.throttled_s
    return 0.0 unless CPU_STAT

    CPU_STAT.pread(4096, 0).each_line do |line|
      key, value = line.split
      return value.to_i / 1e6 if key == "throttled_usec"
      return value.to_i / 1e9 if key == "throttled_time"
    end
    0.0
  rescue SystemCallError, IOError
    0.0
  end
end

class ArenaTiming
  SCHEDSTAT = "/proc/thread-self/schedstat"

  # The app built from the user's rackup file (Rack 2 returns [app, options], Rack 3 the app).
  def self.rackup(path)
    built = Rack::Builder.parse_file(path)
    built.is_a?(Array) ? built.first : built
  end

  def initialize(app)
    @app = app
  end

  def call(env)
    now = Time.now.to_f
    start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    cpu0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
    rq0 = run_queue_s
    gc0 = gc_s
    held0 = throttled_s
    queue = queue_ms(env["HTTP_X_REQUEST_START"], now)
    status, headers, body = @app.call(env)
    if stream?(headers, body)
      timing = []
      timing << format("queue;dur=%.3f", queue) if queue
      timing << format("start;dur=%.3f", (Process.clock_gettime(Process::CLOCK_MONOTONIC) - start) * 1000)
      return [status, stamped(headers, timing), body]
    end
    chunks = []
    begin
      body.each { |chunk| chunks << chunk }
    ensure
      body.close if body.respond_to?(:close)
    end
    cpu = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - cpu0
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
    cpuwall = [cpu + run_queue_s - rq0, cpu].max
    timing = []
    timing << format("queue;dur=%.3f", queue) if queue
    timing << format("app;dur=%.3f, cpu;dur=%.3f, cpuwall;dur=%.3f", wall * 1000, cpu * 1000, cpuwall * 1000)
    in_gc = gc_s - gc0
    timing << format("gc;dur=%.3f", in_gc * 1000) if in_gc > 0 # only a request that met a collection
    held = [throttled_s - held0, wall].min
    timing << format("throttled;dur=%.3f", held * 1000) if held > 0 # only a request that met the quota
    [status, stamped(headers, timing), chunks]
  end

  private

  # A stream: a lazy body (neither an Array nor one that answers to_ary) whose length is not told.
  def stream?(headers, body)
    !body.is_a?(Array) && !body.respond_to?(:to_ary) && headers.keys.none? { |k| k.casecmp?("content-length") }
  end

  # The headers with Arena's Server-Timing metrics (after the app's own) and its ids.
  def stamped(headers, timing)
    headers = headers.dup
    own = headers.keys.find { |k| k.casecmp?("server-timing") }
    if own
      headers[own] = "#{headers[own]}, #{timing.join(', ')}"
    else
      headers["server-timing"] = timing.join(", ")
    end
    headers["x-arena-pid"] = Process.pid.to_s
    headers["x-arena-thread"] = thread_id.to_s
    headers
  end

  def gc_s = ArenaClocks.gc_s
  def throttled_s = ArenaClocks.throttled_s

  # This thread's time waiting for a core so far (schedstat's second field, ns); 0 where absent.
  # The file is opened once per thread (a thread variable, not a fiber-local one) and re-read in
  # place: a pread costs about 2 us, an open and read 10.
  def run_queue_s
    file = Thread.current.thread_variable_get(:arena_schedstat)
    unless file
      file = File.open(SCHEDSTAT)
      Thread.current.thread_variable_set(:arena_schedstat, file)
    end
    file.pread(128, 0).split[1].to_i / 1e9
  rescue SystemCallError, IOError
    0.0
  end

  def queue_ms(value, now)
    return nil if value.nil? || value.empty?
    text = value.strip.delete_prefix("t=")
    at = if text.include?(".")
           Float(text)
         else
           n = Integer(text, 10)
           n >= 10**15 ? n / 1e6 : n >= 10**12 ? n / 1e3 : n.to_f
         end
    [(now - at) * 1000, 0.0].max
  rescue ArgumentError
    nil
  end

  def thread_id
    Thread.current.respond_to?(:native_thread_id) ? Thread.current.native_thread_id : Thread.current.object_id
  end
end
