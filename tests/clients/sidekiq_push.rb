# Pushes jobs with the real Sidekiq client: ruby sidekiq_push.rb QUEUE PLAIN SCHEDULED [RETRY]
# PLAIN jobs go to the queue now; SCHEDULED ones are due in an hour (the "schedule" set); RETRY
# ones are put in the "retry" set as Sidekiq does after a failure. REDIS_URL names the Redis.
require "sidekiq"
require "sidekiq/api"
require_relative "sidekiq_jobs"

queue, plain, scheduled, retries = ARGV[0], ARGV[1].to_i, ARGV[2].to_i, ARGV[3].to_i
plain.times { HoldJob.set(queue: queue).perform_async(queue) }
scheduled.times { HoldJob.set(queue: queue).perform_in(3600, queue) }
retries.times do
  job = {"class" => "HoldJob", "args" => [queue], "queue" => queue, "jid" => SecureRandom.hex(12),
         "retry_count" => 0, "failed_at" => Time.now.to_f, "enqueued_at" => Time.now.to_f}
  Sidekiq.redis { |conn| conn.zadd("retry", Time.now.to_f + 3600, Sidekiq.dump_json(job)) }
end
puts Sidekiq::VERSION
