package nagare;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A KafkaShareConsumer (KIP-932) driven by the share-group tests.
 * Usage: ShareWorker BOOTSTRAP GROUP MODE [ARGS...]
 *   config KEY=VALUE...       sets group configs (IncrementalAlterConfigs on the group)
 *   consume TOPIC N           implicit acknowledgement until N records (or IDLE_EXIT_MS of
 *                             nothing after the first); prints "values v1,v2,..." and
 *                             "counts" (the delivery count of each record)
 *   release TOPIC N           explicit: releases the first N records it gets, then
 *                             accepts until it saw them again; prints "first c" and
 *                             "again c" (their delivery counts)
 *   reject TOPIC              explicit: releases every record it gets until nothing comes
 *                             for 3 s; prints "deliveries v:c,..." (how often each came)
 *   hang TOPIC                polls once, prints "acquired K", then sleeps (killed by the test)
 *   perf TOPIC N              implicit; prints "perf records=N ms=T" and the latency of each
 *                             record (now - record timestamp), as "latency p50 p99 max"
 */
public final class ShareWorker {
    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, boolean explicit) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        String max = System.getenv("MAX_POLL_RECORDS");
        if (max != null) {
            p.put("max.poll.records", max);
        }
        return new KafkaShareConsumer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        String mode = args[2];
        switch (mode) {
            case "config": config(bootstrap, group, args); break;
            case "consume": consume(bootstrap, group, args[3], Integer.parseInt(args[4]), false); break;
            case "perf": consume(bootstrap, group, args[3], Integer.parseInt(args[4]), true); break;
            case "release": release(bootstrap, group, args[3], Integer.parseInt(args[4])); break;
            case "reject": reject(bootstrap, group, args[3]); break;
            case "hang": hang(bootstrap, group, args[3]); break;
            default: throw new IllegalArgumentException(mode);
        }
    }

    static void config(String bootstrap, String group, String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            List<AlterConfigOp> ops = new ArrayList<>();
            for (int i = 3; i < args.length; i++) {
                String[] kv = args[i].split("=", 2);
                ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
            }
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
            System.out.println("OK config");
        }
    }

    static void consume(String bootstrap, String group, String topic, int want, boolean perf) {
        long idle = Long.parseLong(System.getenv().getOrDefault("IDLE_EXIT_MS", "0"));
        long limit = Long.parseLong(System.getenv().getOrDefault("DEADLINE_MS", "60000"));
        List<String> values = new ArrayList<>();
        List<Short> counts = new ArrayList<>();
        long[] latency = new long[perf ? want : 0];
        long start = 0;
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, false)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + limit;
            long last = System.currentTimeMillis();
            long firstPoll = 0;
            boolean announced = false;
            while (values.size() < want && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> polled = c.poll(Duration.ofMillis(200));
                // Tests wait for this line instead of guessing how long a loaded machine
                // takes to start the JVM and join: a second of polls after the first.
                if (!announced) {
                    long now = System.currentTimeMillis();
                    if (firstPoll == 0) {
                        firstPoll = now;
                    } else if (now - firstPoll >= 1000) {
                        System.out.println("polling");
                        System.out.flush();
                        announced = true;
                    }
                }
                for (ConsumerRecord<String, String> r : polled) {
                    long now = System.currentTimeMillis();
                    if (values.isEmpty()) {
                        start = System.nanoTime();
                    }
                    if (perf && values.size() < want) {
                        latency[values.size()] = now - r.timestamp();
                    }
                    values.add(r.value());
                    counts.add(r.deliveryCount().orElse((short) -1));
                    last = now;
                }
                if (idle > 0 && !values.isEmpty() && System.currentTimeMillis() - last > idle) {
                    break;
                }
            }
            long ms = (System.nanoTime() - start) / 1_000_000;
            c.commitSync();
            if (perf) {
                java.util.Arrays.sort(latency);
                System.out.println("perf records=" + values.size() + " ms=" + ms);
                if (latency.length > 0) {
                    System.out.println("latency p50=" + latency[latency.length / 2] + " p99="
                        + latency[(int) (latency.length * 0.99)] + " max=" + latency[latency.length - 1]);
                }
            }
        }
        System.out.println("values " + String.join(",", values));
        StringBuilder sb = new StringBuilder("counts ");
        for (int i = 0; i < counts.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(counts.get(i));
        }
        System.out.println(sb);
        System.out.println("OK consumed " + values.size());
    }

    static void release(String bootstrap, String group, String topic, int n) {
        Map<String, Short> first = new HashMap<>();
        Map<String, Short> again = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (again.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    short count = r.deliveryCount().orElse((short) -1);
                    if (!first.containsKey(r.value()) && first.size() < n) {
                        first.put(r.value(), count);
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                    } else {
                        if (first.containsKey(r.value())) {
                            again.put(r.value(), count);
                        }
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                }
                c.commitSync();
            }
        }
        for (Map.Entry<String, Short> e : first.entrySet()) {
            System.out.println("record " + e.getKey() + " first " + e.getValue() + " again " + again.get(e.getKey()));
        }
        System.out.println("OK released " + first.size() + " redelivered " + again.size());
    }

    static void reject(String bootstrap, String group, String topic) {
        Map<String, Integer> seen = new HashMap<>();
        Map<String, Short> maxCount = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            long last = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline) {
                boolean any = false;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    any = true;
                    seen.merge(r.value(), 1, Integer::sum);
                    maxCount.merge(r.value(), r.deliveryCount().orElse((short) -1), (a, b) -> (short) Math.max(a, b));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
                if (any) {
                    last = System.currentTimeMillis();
                } else if (!seen.isEmpty() && System.currentTimeMillis() - last > 3000) {
                    break;
                }
            }
        }
        StringBuilder sb = new StringBuilder("deliveries ");
        seen.forEach((k, v) -> sb.append(k).append(':').append(v).append(':').append(maxCount.get(k)).append(','));
        System.out.println(sb);
        System.out.println("OK rejected");
    }

    static void hang(String bootstrap, String group, String topic) throws Exception {
        KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true);
        c.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 30_000;
        int got = 0;
        while (got == 0 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got++;
            }
        }
        System.out.println("acquired " + got);
        System.out.flush();
        Thread.sleep(600_000);
    }
}
