package nagare;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the Java client (kafka-clients 4.3.1): consume-transform-produce with
 * sendOffsetsToTransaction (commit, then abort), zombie fencing, and the Admin
 * describeTransactions / listTransactions. Prints one "OK ..." line per check.
 */
public class TxnClientTest {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String in = prefix + "-in";
        String out = prefix + "-out";
        String group = prefix + "-group";
        String txnId = prefix + "-txn";
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(in, 1, (short) 1), new NewTopic(out, 1, (short) 1)))
                .all().get();
        }
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(producerProps(bootstrap, null))) {
            for (int i = 0; i < 20; i++) {
                plain.send(new ProducerRecord<>(in, 0, "k" + i, "v" + i));
            }
            plain.flush();
        }

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("isolation.level", "read_committed");
        // One record per poll: each round takes exactly the next ten.
        cp.put("max.poll.records", "1");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
            consumer.subscribe(List.of(in));
            producer.initTransactions();
            for (int round = 0; round < 2; round++) {
                producer.beginTransaction();
                int got = 0;
                long deadline = System.currentTimeMillis() + 30_000;
                while (got < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        if (got < 10) {
                            producer.send(new ProducerRecord<>(out, 0, r.key(), r.value().toUpperCase()));
                            got++;
                        }
                    }
                }
                check(got == 10, "consumed " + got + " of 10 in round " + round);
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                TopicPartition tp = new TopicPartition(in, 0);
                offsets.put(tp, new OffsetAndMetadata(10L * (round + 1)));
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (round == 0) {
                    producer.commitTransaction();
                    System.out.println("OK committed round 0");
                } else {
                    producer.abortTransaction();
                    System.out.println("OK aborted round 1");
                }
            }
        }
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            long offset = committed.get(new TopicPartition(in, 0)).offset();
            check(offset == 10, "committed offset " + offset + ", expected 10");
            System.out.println("OK group offset 10");
            TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
            check(d.state().toString().equals("CompleteAbort"), "state " + d.state());
            check(d.producerId() >= 0 && d.producerEpoch() >= 0, "producer " + d.producerId());
            System.out.println("OK describe " + d.state());
            Collection<TransactionListing> listed = admin.listTransactions().all().get();
            boolean found = listed.stream().anyMatch(l -> l.transactionalId().equals(txnId));
            check(found, "listTransactions misses " + txnId + ": " + listed);
            System.out.println("OK list " + listed.size());
        }

        // Zombie fencing: a second instance with the same id fences the first.
        try (KafkaProducer<String, String> zombie = new KafkaProducer<>(producerProps(bootstrap, txnId));
             KafkaProducer<String, String> fresh = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(out, 0, "z", "ZOMBIE")).get();
            fresh.initTransactions();
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(out, 0, "f", "FRESH")).get();
            fresh.commitTransaction();
            boolean fenced = false;
            try {
                zombie.commitTransaction();
            } catch (ProducerFencedException e) {
                fenced = true;
            } catch (KafkaException e) {
                fenced = e.getCause() instanceof ProducerFencedException
                    || String.valueOf(e.getMessage()).toLowerCase().contains("fenced");
                if (!fenced) {
                    throw e;
                }
            }
            check(fenced, "zombie was not fenced");
            System.out.println("OK zombie fenced");
        }

        List<String> values = new ArrayList<>();
        Properties rp = new Properties();
        rp.putAll(cp);
        rp.put("group.id", prefix + "-reader");
        try (KafkaConsumer<String, String> reader = new KafkaConsumer<>(rp)) {
            TopicPartition tp = new TopicPartition(out, 0);
            reader.assign(Set.of(tp));
            reader.seekToBeginning(Set.of(tp));
            long deadline = System.currentTimeMillis() + 10_000;
            while (System.currentTimeMillis() < deadline && values.size() < 11) {
                for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
            // Linger to catch what must not be there.
            for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(1000))) {
                values.add(r.value());
            }
        }
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            expected.add("V" + i);
        }
        expected.add("FRESH");
        check(values.equals(expected), "read_committed saw " + values);
        System.out.println("OK read_committed " + values.size());
    }

    static Properties producerProps(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        if (txnId != null) {
            p.put("transactional.id", txnId);
        }
        return p;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }
}
