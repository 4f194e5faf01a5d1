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
