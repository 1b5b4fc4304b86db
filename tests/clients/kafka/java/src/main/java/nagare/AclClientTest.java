package nagare;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * ACLs through the Java AdminClient (CreateAcls, DescribeAcls, DeleteAcls at the versions
 * kafka-clients 4 sends), over SASL_PLAINTEXT with SCRAM-SHA-256.
 * Usage: BOOTSTRAP TOPIC ADMIN_USER ADMIN_PASSWORD USER PASSWORD
 * The admin lets USER write to topics starting with TOPIC but denies TOPIC itself: USER's
 * (idempotent) producer is refused; once the DENY is deleted, the same producer succeeds.
 * Prints "OK ..." and exits 0 when everything checked out.
 */
public final class AclClientTest {
    static Properties sasl(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required"
                + " username=\"" + user + "\" password=\"" + password + "\";");
        return p;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String principal = "User:" + args[4];
        AclBinding allowPrefix = new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, topic, PatternType.PREFIXED),
                new AccessControlEntry(principal, "*", AclOperation.WRITE, AclPermissionType.ALLOW));
        AclBinding deny = new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry(principal, "*", AclOperation.WRITE, AclPermissionType.DENY));
        try (Admin admin = Admin.create(sasl(bootstrap, args[2], args[3]))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            admin.createAcls(List.of(allowPrefix, deny)).all().get();
            AclBindingFilter mine = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH),
                    new AccessControlEntryFilter(principal, null, AclOperation.ANY, AclPermissionType.ANY));
            Collection<AclBinding> found = admin.describeAcls(mine).values().get();
            if (found.size() != 2 || !found.contains(allowPrefix) || !found.contains(deny)) {
                throw new IllegalStateException("describeAcls found " + found);
            }

            // USER may not look at ACLs: DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED.
            try (Admin user = Admin.create(sasl(bootstrap, args[4], args[5]))) {
                user.describeAcls(mine).values().get();
                throw new IllegalStateException("describeAcls was allowed");
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof ClusterAuthorizationException)) {
                    throw e;
                }
            }

            Properties p = sasl(bootstrap, args[4], args[5]);
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            p.put("max.block.ms", "10000");
            p.put("delivery.timeout.ms", "10000");
            p.put("request.timeout.ms", "5000");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                try {
                    producer.send(new ProducerRecord<>(topic, "k", "denied")).get();
                    throw new IllegalStateException("the DENY did not refuse the write");
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicAuthorizationException)) {
                        throw e;
                    }
                }
                System.out.println("OK refused " + topic);
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(deny.toFilter())).all().get();
                if (!deleted.equals(List.of(deny))) {
                    throw new IllegalStateException("deleteAcls removed " + deleted);
                }
                // The same producer (same connection) is allowed once the change is seen.
                long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
                while (true) {
                    try {
                        long offset = producer.send(new ProducerRecord<>(topic, "k", "allowed")).get().offset();
                        System.out.println("OK produced at offset " + offset);
                        break;
                    } catch (ExecutionException e) {
                        if (!(e.getCause() instanceof TopicAuthorizationException) || System.nanoTime() > deadline) {
                            throw e;
                        }
                        Thread.sleep(200);
                    }
                }
            }
            admin.deleteAcls(List.of(allowPrefix.toFilter())).all().get();
        }
    }
}
