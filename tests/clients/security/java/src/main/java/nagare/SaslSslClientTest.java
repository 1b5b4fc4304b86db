package nagare;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Apache Kafka Java client against nagare with SASL (SCRAM-SHA-256 by default) over
 * TLS, the CA given as a PEM truststore. Every wait is bounded.
 *
 * Usage:
 *   produce  BOOTSTRAP PROTOCOL CA USER PASS TOPIC COUNT      acks=all, idempotent
 *   consume  BOOTSTRAP PROTOCOL CA USER PASS TOPIC COUNT GROUP subscribe() with a group
 *   refused  BOOTSTRAP PROTOCOL CA USER PASS EXPECTED          must fail with EXPECTED
 * PROTOCOL is SASL_SSL or SASL_PLAINTEXT (CA is then ignored); EXPECTED is the simple
 * class name of an exception that must be in the failure's cause chain, e.g.
 * SaslAuthenticationException. The mechanism is $SASL_MECHANISM or SCRAM-SHA-256.
 * Prints "OK ..." and exits 0 when everything checked out.
 */
public final class SaslSslClientTest {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Properties p = security(args[1], args[2], args[3], args[4], args[5]);
        switch (mode) {
            case "produce" -> produce(p, args[6], Integer.parseInt(args[7]));
            case "consume" -> consume(p, args[6], Integer.parseInt(args[7]), args[8]);
            case "refused" -> refused(p, args[6]);
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    static Properties security(String bootstrap, String protocol, String ca, String user, String pass) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", protocol);
        String mechanism = System.getenv().getOrDefault("SASL_MECHANISM", "SCRAM-SHA-256");
        p.put("sasl.mechanism", mechanism);
        String module = mechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + pass + "\";");
        if (protocol.startsWith("SASL_SSL") || protocol.equals("SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", ca);
        }
        // Bounded everywhere: a hang is a failure, not a wait.
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "20000");
        p.put("socket.connection.setup.timeout.ms", "5000");
        p.put("socket.connection.setup.timeout.max.ms", "10000");
        p.put("reconnect.backoff.max.ms", "1000");
        return p;
    }

    static void produce(Properties p, String topic, int count) throws Exception {
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "30000");
        p.put("linger.ms", "5");
        long start = System.nanoTime();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key-" + i, "value-" + i);
                r.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            Map<Integer, Long> next = new HashMap<>();
            for (int i = 0; i < count; i++) {
                RecordMetadata m = sent.get(i).get();
                // Within a partition offsets are dense and in send order.
                long want = next.getOrDefault(m.partition(), -1L);
                if (want >= 0 && m.offset() != want) {
                    throw new IllegalStateException("record " + i + " got offset " + m.offset()
                            + " in partition " + m.partition() + ", expected " + want);
                }
                next.put(m.partition(), m.offset() + 1);
            }
        }
        System.out.printf("OK produced %d in %.1f s%n", count, (System.nanoTime() - start) / 1e9);
    }

    static void consume(Properties p, String topic, int count, String group) {
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "1000");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            boolean[] seen = new boolean[count];
            Map<Integer, Integer> lastInPartition = new HashMap<>();
            int got = 0;
            long deadline = System.currentTimeMillis() + 40_000;
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    int n = Integer.parseInt(new String(r.headers().lastHeader("n").value(), StandardCharsets.UTF_8));
                    if (n < 0 || n >= count || seen[n] || !r.key().equals("key-" + n)
                            || !r.value().equals("value-" + n)) {
                        throw new IllegalStateException("unexpected or duplicate record: " + r);
                    }
                    Integer last = lastInPartition.get(r.partition());
                    if (last != null && last > n) {
                        throw new IllegalStateException("out of order in partition " + r.partition() + ": " + r);
                    }
                    lastInPartition.put(r.partition(), n);
                    seen[n] = true;
                    got++;
                }
            }
            if (got != count) {
                throw new IllegalStateException("consumed " + got + " of " + count);
            }
            consumer.commitSync(Duration.ofSeconds(15));
            Set<TopicPartition> assigned = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(15));
            long total = 0;
            for (TopicPartition tp : assigned) {
                OffsetAndMetadata om = committed.get(tp);
                long pos = consumer.position(tp, Duration.ofSeconds(15));
                if (om == null || om.offset() != pos) {
                    throw new IllegalStateException("committed " + om + " for " + tp + " but position is " + pos);
                }
                total += om.offset();
            }
            System.out.println("OK consumed " + count + " in group " + group + " from " + assigned.size()
                    + " partition(s), committed offsets sum " + total);
        }
    }

    static void refused(Properties p, String expected) {
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("max.block.ms", "15000");
        p.put("delivery.timeout.ms", "20000");
        long start = System.nanoTime();
        Throwable failure = null;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>("refused-topic", "k", "v")).get();
        } catch (ExecutionException e) {
            failure = e.getCause();
        } catch (Exception e) {
            failure = e;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        if (failure == null) {
            throw new IllegalStateException("the broker accepted the record; expected " + expected);
        }
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t.getClass().getSimpleName().equals(expected)) {
                System.out.printf("OK refused with %s after %.1f s: %s%n", expected, secs, t.getMessage());
                return;
            }
        }
        throw new IllegalStateException("expected " + expected + " but got " + failure, failure);
    }
}
