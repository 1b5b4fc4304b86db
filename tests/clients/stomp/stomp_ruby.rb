# The Ruby `stomp` gem (Debian ruby-stomp) against nagare; driven by test_stomp_ruby.py.
# Usage: ruby stomp_ruby.rb HOST PORT VERSION SCENARIO [LOGIN PASSCODE];
# prints "OK <scenario>" on success. With STOMP_TLS_CA=FILE in the environment it
# connects over TLS, verifying the server against that CA.
require 'stomp'
require 'timeout'
require 'securerandom'

HOST, PORT, VERSION, SCENARIO = ARGV[0], ARGV[1].to_i, ARGV[2], ARGV[3]
LOGIN, PASSCODE = ARGV[4] || '', ARGV[5] || ''

def tls_params
  ca = ENV['STOMP_TLS_CA']
  return false if ca.nil? || ca.empty?
  Stomp::SSLParams.new(ts_files: ca, fsck: true)
end

def connection(extra = {})
  headers = VERSION == '1.0' ? {} : { 'accept-version' => VERSION, 'host' => '/' }
  Stomp::Connection.new(
    hosts: [{ login: LOGIN, passcode: PASSCODE, host: HOST, port: PORT, ssl: tls_params }],
    connect_headers: headers.merge(extra),
    reliable: false,
    connect_timeout: 5
  )
end

def receive(conn, secs = 10)
  Timeout.timeout(secs) { conn.receive }
end

def messages(conn, n, secs = 15)
  Timeout.timeout(secs) { Array.new(n) { m = conn.receive; raise "not a MESSAGE: #{m.command} #{m.body}" unless m.command == 'MESSAGE'; m } }
end

def nothing(conn, secs)
  Timeout.timeout(secs) { m = conn.receive; raise "unexpected #{m.command} #{m.body.inspect}" }
rescue Timeout::Error
  true
end

def ack(conn, m)
  case VERSION
  when '1.2' then conn.ack(m.headers['ack'])
  when '1.1' then conn.ack(m.headers['message-id'], 'subscription' => m.headers['subscription'])
  else conn.ack(m.headers['message-id'])
  end
end

def nack(conn, m)
  if VERSION == '1.2'
    conn.nack(m.headers['ack'])
  else
    conn.nack(m.headers['message-id'], 'subscription' => m.headers['subscription'])
  end
end

def check(cond, what)
  raise "check failed: #{what}" unless cond
end

def receipt(conn, secs = 10)
  m = receive(conn, secs)
  check(m.command == 'RECEIPT', "RECEIPT expected, got #{m.command} #{m.headers}")
  m.headers['receipt-id']
end

uid = SecureRandom.hex(4)

case SCENARIO
when 'pubsub'
  dest = "/topic/rb-news-#{uid}"
  subs = Array.new(3) do |i|
    c = connection
    c.subscribe(dest, { 'id' => "s#{i}", 'receipt' => "r#{i}" })
    check(receipt(c) == "r#{i}", 'subscribe receipt')
    c
  end
  pub = connection
  20.times { |i| pub.publish(dest, "m#{i}", { 'seq' => i.to_s }) }
  subs.each do |c|
    got = messages(c, 20)
    check(got.map(&:body) == (0...20).map { |i| "m#{i}" }, "bodies #{got.map(&:body)}")
    check(got.map { |m| m.headers['seq'] } == (0...20).map(&:to_s), 'seq headers')
    c.disconnect
  end
  pub.disconnect
when 'queue'
  dest = "/queue/rb-work-#{uid}"
  a = connection
  b = connection
  a.subscribe(dest, { 'id' => 'a', 'ack' => 'client-individual', 'prefetch-count' => '1' })
  b.subscribe(dest, { 'id' => 'b', 'ack' => 'client-individual', 'prefetch-count' => '1' })
  pub = connection
  10.times { |i| pub.publish(dest, i.to_s, { 'receipt' => "p#{i}" }) }
  10.times { receipt(pub) }
  got = []
  until got.size == 10
    [a, b].each do |c|
      m = c.poll
      next unless m
      got << [c, m.body]
      ack(c, m)
    end
    sleep 0.005
  end
  check(got.map { |_, body| body.to_i }.sort == (0...10).to_a, "all ten once #{got.map(&:last)}")
  check(got.count { |c, _| c == a } > 0 && got.count { |c, _| c == b } > 0, 'both consumers got some')
when 'acks'
  dest = "/queue/rb-acks-#{uid}"
  pub = connection
  4.times { |i| pub.publish(dest, i.to_s) }
  c = connection
  c.subscribe(dest, { 'id' => '1', 'ack' => 'client' })
  got = messages(c, 4)
  ack(c, got[1]) # cumulative: 0 and 1
  if VERSION != '1.0'
    nack(c, got[2])
    back = receive(c)
    check(back.body == '2' && back.headers['redelivered'] == 'true', "nack redelivery #{back.headers}")
  end
  c.disconnect
  d = connection
  d.subscribe(dest, { 'id' => '2', 'ack' => 'client-individual' })
  rest = messages(d, 2)
  check(rest.map(&:body) == %w[2 3], "redelivered after disconnect #{rest.map(&:body)}")
  check(rest.all? { |m| m.headers['redelivered'] == 'true' }, 'redelivered flag')
when 'tx'
  dest = "/queue/rb-tx-#{uid}"
  c = connection
  c.subscribe(dest, { 'id' => '1' })
  c.begin('t1')
  c.publish(dest, 'gone', { 'transaction' => 't1' })
  c.abort('t1')
  c.begin('t2')
  c.publish(dest, 'kept', { 'transaction' => 't2' })
  nothing(c, 0.3)
  c.commit('t2', { 'receipt' => 'c' })
  m1 = receive(c)
  m2 = receive(c)
  kinds = [m1, m2].map(&:command).sort
  check(kinds == %w[MESSAGE RECEIPT], "commit result #{kinds}")
  msg = [m1, m2].find { |m| m.command == 'MESSAGE' }
  check(msg.body == 'kept', 'committed body')
when 'binary'
  dest = "/queue/rb-bin-#{uid}"
  c = connection
  c.subscribe(dest, { 'id' => '1' })
  payload = (0..255).map(&:chr).join.b * 4 + "\0\0end".b
  c.publish(dest, payload, { 'content-type' => 'application/octet-stream' })
  m = receive(c)
  check(m.body.b == payload, 'binary body round trip')
when 'rpc'
  service = "/queue/rb-rpc-#{uid}"
  server = connection
  server.subscribe(service, { 'id' => 'rpc', 'prefetch-count' => '100', 'receipt' => 's' })
  receipt(server)
  client = connection
  n = 300
  n.times { |i| client.publish(service, i.to_s, { 'reply-to' => '/temp-queue/rb', 'correlation-id' => "c#{i}" }) }
  t = Thread.new do
    n.times do
      m = receive(server)
      server.publish(m.headers['reply-to'], (m.body.to_i + 1).to_s, { 'correlation-id' => m.headers['correlation-id'] })
    end
  end
  replies = messages(client, n, 30)
  t.join
  got = replies.to_h { |m| [m.headers['correlation-id'], m.body.to_i] }
  check(got == (0...n).to_h { |i| ["c#{i}", i + 1] }, 'every reply matches its request')
  check(replies.all? { |m| m.headers['subscription'] == '/temp-queue/rb' }, 'temp-queue subscription header')
when 'heartbeat'
  c = connection('heart-beat' => '200,200')
  sleep 1.5
  check(c.open?, 'still open')
  c.publish("/queue/rb-hb-#{uid}", 'x', { 'receipt' => 'hb' })
  check(receipt(c) == 'hb', 'receipt after heart-beats')
when 'login'
  # The credentials on the command line are right: pub/sub works as that user.
  dest = "/topic/rb-login-#{uid}"
  c = connection
  check(c.connection_frame.command == 'CONNECTED', "CONNECTED expected, got #{c.connection_frame.command}")
  c.subscribe(dest, { 'id' => 's', 'receipt' => 'sub' })
  check(receipt(c) == 'sub', 'subscribe receipt')
  c.publish(dest, 'hello', { 'receipt' => 'pub' })
  got = []
  got << receive(c) until got.count { |m| m.command == 'MESSAGE' } == 1 && got.any? { |m| m.command == 'RECEIPT' }
  check(got.find { |m| m.command == 'MESSAGE' }.body == 'hello', 'body')
  c.disconnect
when 'login_refused'
  # The credentials on the command line are wrong (or absent): CONNECT gets one ERROR
  # that does not say whether the user exists, then the server closes.
  c = connection
  f = c.connection_frame
  check(f.command == 'ERROR', "ERROR expected, got #{f.command} #{f.headers}")
  check(f.headers['message'] == 'Authentication failed: bad login or passcode', "message #{f.headers}")
  check(!c.open? || (begin; Timeout.timeout(5) { c.receive }.nil?; rescue StandardError; true; end), 'closed after the ERROR')
when 'denied_send'
  # Allowed to log in, not to write this topic: the SEND gets an ERROR naming the
  # destination and the operation, with the receipt id it asked for.
  dest = "/topic/#{ARGV[6]}"
  c = connection
  check(c.connection_frame.command == 'CONNECTED', 'connected')
  c.publish(dest, 'nope', { 'receipt' => 'denied' })
  m = receive(c)
  check(m.command == 'ERROR', "ERROR expected, got #{m.command}")
  check(m.headers['receipt-id'] == 'denied', "receipt-id #{m.headers}")
  check(m.headers['message'].include?('Write') && m.headers['message'].include?(dest), "message #{m.headers}")
else
  raise "unknown scenario #{SCENARIO}"
end
puts "OK #{SCENARIO}"
