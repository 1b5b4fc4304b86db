package nagare;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * The share-group side of the Java Admin client, driven by the share-group tests.
 * Usage: ShareAdmin BOOTSTRAP GROUP COMMAND [ARGS...]
 *   describe                  "group STATE members=N" then "member ID topic-partitions"
 *   offsets                   "offset TOPIC-P START" per share partition (listShareGroupOffsets)
 *   alter TOPIC P OFFSET      alterShareGroupOffsets
 *   delete-offsets TOPIC      deleteShareGroupOffsets
 *   list                      "share-group ID STATE" per share group (listGroups forShareGroups)
 *   delete                    deleteShareGroups
 * Errors are printed as "error CLASS: MESSAGE" with exit code 2.
 */
public final class ShareAdmin {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        String group = args[1];
        try (Admin admin = Admin.create(p)) {
            switch (args[2]) {
                case "describe": {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all().get().get(group);
                    System.out.println("group " + d.groupState() + " members=" + d.members().size());
                    for (ShareMemberDescription m : d.members()) {
                        List<String> tps = new java.util.ArrayList<>();
                        for (TopicPartition tp : m.assignment().topicPartitions()) {
                            tps.add(tp.toString());
                        }
                        java.util.Collections.sort(tps);
                        System.out.println("member " + m.consumerId() + " " + String.join(",", tps));
                    }
                    break;
                }
                case "offsets": {
                    Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                        .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                        .partitionsToOffsetInfo(group).get();
                    for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                        System.out.println("offset " + e.getKey() + " "
                            + (e.getValue() == null ? "null" : e.getValue().startOffset()));
                    }
                    break;
                }
                case "alter":
                    admin.alterShareGroupOffsets(group, Map.of(
                        new TopicPartition(args[3], Integer.parseInt(args[4])), Long.parseLong(args[5])))
                        .all().get();
                    break;
                case "delete-offsets":
                    admin.deleteShareGroupOffsets(group, Set.of(args[3])).all().get();
                    break;
                case "list":
                    for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                        System.out.println("share-group " + g.groupId() + " " + g.groupState().orElse(null));
                    }
                    break;
                case "delete":
                    admin.deleteShareGroups(List.of(group)).all().get();
                    break;
                default:
                    throw new IllegalArgumentException(args[2]);
            }
            System.out.println("OK " + args[2]);
        } catch (java.util.concurrent.ExecutionException e) {
            System.out.println("error " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            System.exit(2);
        }
    }
}
