package nagare;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * One unmodified Kafka Connect distributed worker (what bin/connect-distributed.sh runs),
 * started and stopped by commands on stdin so that a test restarts it inside one JVM:
 *
 *   start  start a worker; print "URL http://127.0.0.1:PORT/" once its REST API answers
 *   stop   stop it cleanly (source offsets flushed, sink offsets committed), "STOPPED"
 *   halt   end the JVM at once, as a crash (no flush, no commit, no leave-group)
 *
 * The worker creates its config, offset and status topics itself (compacted, as Connect
 * does). Connectors come from the classpath (connect-file) through the ServiceLoader.
 */
public final class ConnectWorker {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ConnectWorker BOOTSTRAP GROUP_ID [key=value worker overrides...]");
            System.exit(2);
        }
        Map<String, String> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("config.storage.topic", args[1] + "-configs");
        props.put("offset.storage.topic", args[1] + "-offsets");
        props.put("status.storage.topic", args[1] + "-status");
        props.put("config.storage.replication.factor", "1");
        props.put("offset.storage.replication.factor", "1");
        props.put("status.storage.replication.factor", "1");
        props.put("offset.storage.partitions", "5");
        props.put("status.storage.partitions", "3");
        props.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        props.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        // Source offsets flushed every second rather than every minute.
        props.put("offset.flush.interval.ms", "1000");
        // A worker that vanished (crash) has its tasks reassigned at once, not after 5 min.
        props.put("scheduled.rebalance.max.delay.ms", "0");
        props.put("session.timeout.ms", "6000");
        props.put("heartbeat.interval.ms", "1000");
        props.put("listeners", "http://127.0.0.1:0");
        props.put("plugin.discovery", "service_load");
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Connect<?> connect = null;
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "start":
                    try {
                        connect = new ConnectDistributed().startConnect(new HashMap<>(props));
                        System.out.println("URL " + connect.rest().advertisedUrl());
                    } catch (Exception e) {
                        System.out.println("FAILED start: " + e);
                        e.printStackTrace(System.out);
                    }
                    break;
                case "stop":
                    if (connect != null) {
                        connect.stop();
                        connect.awaitStop();
                        connect = null;
                    }
                    System.out.println("STOPPED");
                    break;
                case "halt":
                    System.out.println("HALT");
                    System.out.flush();
                    Runtime.getRuntime().halt(3);
                    break;
                default:
                    System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        if (connect != null) {
            connect.stop();
            connect.awaitStop();
        }
    }
}
