package nagare;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * An unmodified Kafka Streams word count driven by commands on stdin, so a test can start,
 * stop, crash and restore one application inside one JVM (a crash ends the JVM):
 *
 *   start   build and start KafkaStreams, print "RUNNING" once it runs
 *   stop    close it (leaving the group so the next start needs no session timeout), "STOPPED"
 *   arm     the next record with the word "crashnow" halts the JVM mid-transaction
 *   restored print "RESTORED n": records restored from the changelog since the last start
 *
 * Topology: lines of INPUT → words → repartition by word → count() into a KTable whose
 * changelog topic Streams creates compacted → OUTPUT (word → count as a long).
 * processing.guarantee=exactly_once_v2 and no record cache: every input word gives exactly
 * one committed output update, so a read_committed reader must see 1, 2, ..., n per word.
 */
public final class WordCount {
    private static volatile boolean armed = false;

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: WordCount BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR");
            System.exit(2);
        }
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A crashed instance's member must not hold the group for the default 45 s.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Short so that a transaction left open by a crash never blocks the test for long,
        // even if nothing else aborts it.
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        KafkaStreams streams = null;
        final long[] restored = {0};
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "start": {
                    StreamsBuilder b = new StreamsBuilder();
                    KTable<String, Long> counts = b.<String, String>stream(input)
                        .flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
                        .filter((k, w) -> !w.isEmpty())
                        .peek((k, w) -> {
                            if (armed && w.equals("crashnow")) {
                                System.out.println("HALT");
                                System.out.flush();
                                Runtime.getRuntime().halt(3);
                            }
                        })
                        .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                        .count(Materialized.as("counts-store"));
                    counts.toStream().to(output, Produced.with(Serdes.String(), Serdes.Long()));
                    streams = new KafkaStreams(b.build(), p);
                    CountDownLatch running = new CountDownLatch(1);
                    streams.setStateListener((n, o) -> {
                        if (n == KafkaStreams.State.RUNNING) running.countDown();
                        if (n == KafkaStreams.State.ERROR) {
                            System.out.println("ERROR state");
                            System.out.flush();
                        }
                    });
                    restored[0] = 0;
                    streams.setGlobalStateRestoreListener(new org.apache.kafka.streams.processor.StateRestoreListener() {
                        public void onRestoreStart(org.apache.kafka.common.TopicPartition tp, String s, long a, long e) {
                            System.out.println("INFO restore start " + tp + " " + a + ".." + e);
                        }
                        public void onBatchRestored(org.apache.kafka.common.TopicPartition tp, String s, long end, long n) {
                            synchronized (restored) { restored[0] += n; }
                        }
                        public void onRestoreEnd(org.apache.kafka.common.TopicPartition tp, String s, long n) {
                            System.out.println("INFO restore end " + tp + " " + n);
                        }
                    });
                    streams.setUncaughtExceptionHandler(e -> {
                        System.out.println("UNCAUGHT " + e);
                        e.printStackTrace(System.out);
                        System.out.flush();
                        return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                            .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
                    });
                    streams.start();
                    if (!running.await(60, TimeUnit.SECONDS)) {
                        System.out.println("FAILED not RUNNING after 60 s: " + streams.state());
                    } else {
                        System.out.println("RUNNING");
                    }
                    break;
                }
                case "stop":
                    if (streams != null) {
                        streams.close(CloseOptions.timeout(Duration.ofSeconds(30))
                            .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
                        streams = null;
                    }
                    System.out.println("STOPPED");
                    break;
                case "arm":
                    armed = true;
                    System.out.println("ARMED");
                    break;
                case "restored":
                    synchronized (restored) { System.out.println("RESTORED " + restored[0]); }
                    break;
                default:
                    System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        if (streams != null) streams.close(Duration.ofSeconds(30));
    }
}
