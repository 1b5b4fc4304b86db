package nagare;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KafkaConsumer in a group: subscribe(), poll until N records, commitSync(), close.
 * Usage: GroupConsumer BOOTSTRAP TOPIC GROUP N [GROUP_INSTANCE_ID]. Prints the values.
 * With IDLE_EXIT_MS set, it also stops once nothing arrived for that long (after the
 * first record), for members sharing N records with others.
 */
public final class GroupConsumer {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (args.length > 4 && !args[4].isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[4]);
        }
        int want = Integer.parseInt(args[3]);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {}
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    System.out.println("assigned " + parts.size());
                }
            });
            long idle = Long.parseLong(System.getenv().getOrDefault("IDLE_EXIT_MS", "0"));
            long deadline = System.currentTimeMillis() + 30_000;
            long last = System.currentTimeMillis();
            while (values.size() < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                    last = System.currentTimeMillis();
                }
                if (idle > 0 && !values.isEmpty() && System.currentTimeMillis() - last > idle) {
                    break;
                }
            }
            c.commitSync();
            // Anything beyond N would show up here: the commit must cover exactly what was read.
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                values.add(r.value());
            }
        }
        System.out.println("values " + String.join(",", values));
        System.out.println("OK consumed " + values.size());
    }
}
