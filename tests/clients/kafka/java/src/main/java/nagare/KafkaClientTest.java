package nagare;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Apache Kafka Java client against nagare, default settings (idempotent, acks=all).
 * Usage: produce BOOTSTRAP TOPIC COUNT | consume BOOTSTRAP TOPIC COUNT
 *        | perf-consume BOOTSTRAP TOPIC COUNT (throughput of an assign() consumer, for benchmarks).
 * Prints "OK ..." and exits 0 when everything checked out.
 */
public final class KafkaClientTest {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        if (mode.equals("produce")) {
            produce(bootstrap, topic, count);
        } else if (mode.equals("perf-consume")) {
            perfConsume(bootstrap, topic, count);
        } else {
            consume(bootstrap, topic, count);
        }
    }

    static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, "key-" + i, "value-" + i);
                r.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            for (int i = 0; i < count; i++) {
                long offset = sent.get(i).get().offset();
                if (offset != i) {
                    throw new IllegalStateException("record " + i + " got offset " + offset);
                }
            }
        }
        System.out.println("OK produced " + count);
    }

    static void consume(String bootstrap, String topic, int count) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 20_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    String n = new String(r.headers().lastHeader("n").value(), StandardCharsets.UTF_8);
                    if (r.offset() != seen || !r.key().equals("key-" + seen)
                            || !r.value().equals("value-" + seen) || !n.equals(Integer.toString(seen))) {
                        throw new IllegalStateException("unexpected record at " + seen + ": " + r);
                    }
                    seen++;
                }
            }
            if (seen != count) {
                throw new IllegalStateException("consumed " + seen + " of " + count);
            }
        }
        System.out.println("OK consumed " + count);
    }

    static void perfConsume(String bootstrap, String topic, int count) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long seen = 0;
            long bytes = 0;
            long start = System.nanoTime();
            long deadline = System.currentTimeMillis() + 120_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    seen++;
                    bytes += r.value() == null ? 0 : r.value().length;
                }
            }
            double secs = (System.nanoTime() - start) / 1e9;
            System.out.printf("RESULT consumed=%d secs=%.3f records_per_sec=%.0f mb_per_sec=%.2f%n",
                    seen, secs, seen / secs, bytes / 1e6 / secs);
        }
    }
}
