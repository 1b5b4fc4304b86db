// Sends events with Fluency (PackedForward chunks with ack) as a pytest test drives it:
// ForwardSender HOST PORT TAG COUNT. Each event is {"seq": i, "msg": "..."} with an event
// time of 1700000000+i seconds and i*1000 ns (EventTime).
import java.util.HashMap;
import java.util.Map;
import org.komamitsu.fluency.EventTime;
import org.komamitsu.fluency.Fluency;
import org.komamitsu.fluency.fluentd.FluencyBuilderForFluentd;

public class ForwardSender {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String tag = args[2];
        int count = Integer.parseInt(args[3]);
        FluencyBuilderForFluentd builder = new FluencyBuilderForFluentd();
        builder.setAckResponseMode(true);
        builder.setFlushAttemptIntervalMillis(200);
        builder.setSenderMaxRetryCount(3);
        Fluency fluency = builder.build(host, port);
        for (int i = 0; i < count; i++) {
            Map<String, Object> event = new HashMap<>();
            event.put("seq", i);
            event.put("msg", "java event " + i);
            fluency.emit(tag, EventTime.fromEpoch(1700000000L + i, i * 1000L), event);
        }
        fluency.flush();
        fluency.close();
        long deadline = System.currentTimeMillis() + 20000;
        while (!fluency.isTerminated() && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        if (!fluency.isTerminated()) {
            System.err.println("fluency did not terminate");
            System.exit(1);
        }
        if (fluency.getBufferedDataSize() > 0) {
            System.err.println("data left in the buffer");
            System.exit(1);
        }
        System.out.println("sent " + count);
    }
}
