package nagare;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java Admin client against the config and record APIs: describeLogDirs,
 * describeTopics (DescribeTopicPartitions with a small page size so the cursor is used),
 * listOffsets with maxTimestamp / earliestLocal / latestTiered, deleteRecords, configs
 * of the cluster-wide broker resource "" with synonyms and documentation.
 * Usage: AdminConfigsTest BOOTSTRAP. Prints "OK admin" and exits 0 when all checked out.
 */
public final class AdminConfigsTest {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            run(admin, args[0]);
        }
        System.out.println("OK admin");
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    static void run(Admin admin, String bootstrap) throws Exception {
        NewTopic t = new NewTopic("jadmin", 5, (short) 1)
                .configs(Map.of("compression.type", "snappy", "cleanup.policy", "compact,delete"));
        admin.createTopics(List.of(t, new NewTopic("jadmin2", 1, (short) 1))).all().get();

        // DescribeTopicPartitions, paged two partitions at a time.
        Map<String, TopicDescription> topics = admin.describeTopics(List.of("jadmin", "jadmin2"),
                new DescribeTopicsOptions().partitionSizeLimitPerResponse(2)).allTopicNames().get();
        check(topics.get("jadmin").partitions().size() == 5, "jadmin partitions: " + topics.get("jadmin"));
        check(topics.get("jadmin2").partitions().size() == 1, "jadmin2 partitions");
        for (int i = 0; i < 5; i++) {
            check(topics.get("jadmin").partitions().get(i).partition() == i, "partition order");
        }

        // Produce with timestamps, then the ListOffsets specs.
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        long base = System.currentTimeMillis() - 100_000;
        long[] stamps = {base + 10, base + 70, base + 30};
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (long ts : stamps) {
                producer.send(new ProducerRecord<>("jadmin", 0, ts, "k", "v" + ts)).get();
            }
        }
        TopicPartition tp = new TopicPartition("jadmin", 0);
        ListOffsetsResult.ListOffsetsResultInfo max =
                admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
        check(max.offset() == 1 && max.timestamp() == base + 70, "max timestamp: " + max);
        long local = admin.listOffsets(Map.of(tp, OffsetSpec.earliestLocal())).partitionResult(tp).get().offset();
        check(local == 0, "earliest local: " + local);
        long tiered = admin.listOffsets(Map.of(tp, OffsetSpec.latestTiered())).partitionResult(tp).get().offset();
        check(tiered == -1, "latest tiered: " + tiered);

        // DeleteRecords moves the low watermark.
        long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(2)))
                .lowWatermarks().get(tp).get().lowWatermark();
        check(low == 2, "low watermark " + low);
        long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
        check(earliest == 2, "earliest after delete: " + earliest);

        // DescribeLogDirs: one directory holding every partition, with sizes.
        int node = admin.describeCluster().nodes().get().iterator().next().id();
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
        check(dirs.size() == 1, "log dirs: " + dirs);
        LogDirDescription dir = dirs.values().iterator().next();
        check(dir.error() == null, "log dir error " + dir.error());
        check(dir.replicaInfos().containsKey(tp) && dir.replicaInfos().get(tp).size() > 0, "replica info " + dir);
        check(dir.totalBytes().isPresent() && dir.usableBytes().isPresent(), "total/usable bytes");

        // Topic configs with synonyms and documentation.
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "jadmin");
        Config tc = admin.describeConfigs(List.of(topic),
                new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get().get(topic);
        check("snappy".equals(tc.get("compression.type").value()), "compression.type " + tc.get("compression.type"));
        check(tc.get("compression.type").source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "source");
        check("compact,delete".equals(tc.get("cleanup.policy").value()), "cleanup.policy");
        check(tc.get("retention.ms").documentation() != null, "documentation");
        check(tc.get("retention.ms").type() == ConfigEntry.ConfigType.LONG, "type " + tc.get("retention.ms").type());
        check(tc.get("cleanup.policy").type() == ConfigEntry.ConfigType.LIST, "list type");

        // The cluster-wide broker default "" (which librdkafka cannot name).
        ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
        admin.incrementalAlterConfigs(Map.of(cluster, List.of(new AlterConfigOp(
                new ConfigEntry("log.segment.bytes", "2000000"), AlterConfigOp.OpType.SET)))).all().get();
        Config cc = admin.describeConfigs(List.of(cluster)).all().get().get(cluster);
        check("2000000".equals(cc.get("log.segment.bytes").value()), "cluster default " + cc);
        check(cc.get("log.segment.bytes").source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "cluster source");
        ConfigResource t2 = new ConfigResource(ConfigResource.Type.TOPIC, "jadmin2");
        ConfigEntry seg = admin.describeConfigs(List.of(t2), new DescribeConfigsOptions().includeSynonyms(true))
                .all().get().get(t2).get("segment.bytes");
        check("2000000".equals(seg.value()), "topic follows the cluster default: " + seg);
        check(seg.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "topic source " + seg);
        ConfigEntry.ConfigSynonym first = seg.synonyms().get(0);
        check(first.name().equals("log.segment.bytes")
                && first.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "synonyms " + seg.synonyms());
        // validateOnly changes nothing.
        admin.incrementalAlterConfigs(Map.of(t2, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.SET))),
                new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly(true)).all().get();
        check(!"5".equals(admin.describeConfigs(Set.of(t2)).all().get().get(t2).get("retention.ms").value()), "validateOnly");
        admin.incrementalAlterConfigs(Map.of(cluster, List.of(new AlterConfigOp(
                new ConfigEntry("log.segment.bytes", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        check(admin.describeConfigs(Collections.singleton(cluster)).all().get().get(cluster).get("log.segment.bytes") == null,
                "cluster default removed");
    }
}
