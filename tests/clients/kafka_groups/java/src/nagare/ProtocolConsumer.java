package nagare;

import java.io.File;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A long-running KafkaConsumer for the group tests, with group.protocol from the
 * environment (GROUP_PROTOCOL, default "consumer": KIP-848). Usage: ProtocolConsumer
 * BOOTSTRAP TOPIC GROUP. TOPIC starting with "re:" subscribes by broker-side regex
 * (SubscriptionPattern). Prints, one line each and flushed:
 *   subscribed MS | assignment SIZE MS | record TOPIC PARTITION OFFSET VALUE | closed
 * Commits synchronously after every batch. Stops when STOP_FILE exists, after WANT
 * records, or after RUN_MS.
 */
public final class ProtocolConsumer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, System.getenv().getOrDefault("GROUP_PROTOCOL", "consumer"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        String assignor = System.getenv("ASSIGNOR");
        if (assignor != null && !assignor.isEmpty()) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        String instance = System.getenv("INSTANCE_ID");
        if (instance != null && !instance.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        }
        if (!"consumer".equals(p.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG))) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        String stop = System.getenv().getOrDefault("STOP_FILE", "");
        long want = Long.parseLong(System.getenv().getOrDefault("WANT", "0"));
        long runMs = Long.parseLong(System.getenv().getOrDefault("RUN_MS", "60000"));
        long deadline = System.currentTimeMillis() + runMs;
        long seen = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    report(c);
                }
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    report(c);
                }
            };
            System.out.println("subscribed " + System.currentTimeMillis());
            System.out.flush();
            if (args[1].startsWith("re:")) {
                c.subscribe(new SubscriptionPattern(args[1].substring(3)), listener);
            } else {
                c.subscribe(List.of(args[1].split(",")), listener);
            }
            while (System.currentTimeMillis() < deadline) {
                if (!stop.isEmpty() && new File(stop).exists()) {
                    break;
                }
                if (want > 0 && seen >= want) {
                    break;
                }
                int n = 0;
                StringBuilder out = new StringBuilder();
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    out.append("record ").append(r.topic()).append(' ').append(r.partition())
                        .append(' ').append(r.offset()).append(' ').append(r.value()).append('\n');
                    n++;
                }
                if (n > 0) {
                    c.commitSync();
                    seen += n;
                    System.out.print(out);
                    System.out.flush();
                }
            }
        }
        System.out.println("closed");
        System.out.flush();
    }

    private static void report(KafkaConsumer<String, String> c) {
        System.out.println("assignment " + c.assignment().size() + " " + System.currentTimeMillis());
        System.out.flush();
    }
}
