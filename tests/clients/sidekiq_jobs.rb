# The job a real Sidekiq process runs in the tests (sidekiq -r tests/clients/sidekiq_jobs.rb):
# it holds its thread busy until the test sets the Redis key "<its queue>:release", so the
# test decides how long jobs stay in flight. REDIS_URL names the Redis, as Sidekiq reads it.
require "sidekiq"

class HoldJob
  include Sidekiq::Worker

  def perform(queue)
    release = "#{queue}:release"
    sleep 0.05 until Sidekiq.redis { |conn| conn.exists?(release) }
  end
end

# The accuracy benchmark's job (benchmarks/accuracy_workers.py): runs for MS milliseconds and
# records when it started and finished, and in which process, in the hashes "<queue>:started"
# and "<queue>:finished" (jid -> "pid epoch-seconds").
class TimedJob
  include Sidekiq::Worker

  def perform(queue, ms)
    Sidekiq.redis { |conn| conn.hset("#{queue}:started", jid, "#{::Process.pid} #{Time.now.to_f}") }
    sleep ms / 1000.0
    Sidekiq.redis { |conn| conn.hset("#{queue}:finished", jid, "#{::Process.pid} #{Time.now.to_f}") }
  end
end
