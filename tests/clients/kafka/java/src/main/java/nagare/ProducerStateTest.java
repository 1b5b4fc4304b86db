package nagare;

import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * DescribeProducers through the Java Admin client: an idempotent producer (the Java
 * default) writes COUNT records to partition 0, then Admin.describeProducers must list it
 * with the sequence of its last record and no open transaction.
 * Usage: describe-producers BOOTSTRAP TOPIC COUNT, or describe-only BOOTSTRAP TOPIC COUNT
 * (no producing: the producer that wrote COUNT records before must still be listed, e.g.
 * after a broker restart). Prints "OK ..." and exits 0.
 */
public final class ProducerStateTest {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        if (args[0].equals("describe-producers")) {
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                }
                producer.flush();
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            PartitionProducerState state =
                admin.describeProducers(List.of(tp)).partitionResult(tp).get();
            List<ProducerState> producers = state.activeProducers();
            if (producers.size() != 1) {
                throw new IllegalStateException("expected one producer, got " + producers);
            }
            ProducerState s = producers.get(0);
            if (s.lastSequence() != count - 1 || s.currentTransactionStartOffset().isPresent()
                    || s.producerEpoch() < 0 || s.lastTimestamp() <= 0) {
                throw new IllegalStateException("unexpected producer state " + s);
            }
            System.out.println("OK producer " + s.producerId() + " last sequence " + s.lastSequence());
        }
    }
}
