// The "trace" command: one message sent and consumed with the client's message trace on.

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * {@code trace NS TOPIC GROUP KEYS TIMEOUT_S}: a producer and a push consumer built with
 * {@code enableMsgTrace} send and consume one message. Their trace records (Pub; SubBefore
 * and SubAfter) are sent in the background, so both keep running until stdin closes (the
 * test has found the traces by then) or TIMEOUT_S passes; then they shut down.
 * Events: {@code sent} (msgId), {@code consumed}, {@code traced} (whether the message was
 * consumed), {@code done}.
 */
final class Trace {
    private Trace() {
    }

    static int run(String namesrv, String topic, String group, String keys, long timeoutS)
            throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, true);
        ClientDriver.configure(consumer, namesrv, group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        CountDownLatch got = new CountDownLatch(1);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                Events.emit(Events.consumedEvent(m));
                if (keys.equals(m.getKeys())) {
                    got.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        DefaultMQProducer producer = new DefaultMQProducer(group + "_producer", true);
        ClientDriver.configure(producer, namesrv, "trace_producer");
        producer.start();
        boolean consumed;
        try {
            Message msg = new Message(topic, "traced".getBytes(StandardCharsets.UTF_8));
            msg.setKeys(keys);
            SendResult r = producer.send(msg);
            Events.emit(Events.obj("event", "sent", "keys", keys, "msgId", r.getMsgId(),
                "status", r.getSendStatus().name()));
            consumed = got.await(timeoutS, TimeUnit.SECONDS);
            Events.emit(Events.obj("event", "traced", "consumed", consumed));
            Events.flush();
            waitForStdinEnd(timeoutS);
        } finally {
            producer.shutdown();
            consumer.shutdown();
        }
        Events.emit(Events.obj("event", "done", "consumed", consumed));
        return consumed ? 0 : ClientDriver.EXIT_FAILED;
    }

    private static void waitForStdinEnd(long timeoutS) throws Exception {
        Thread reader = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                    continue;
                }
            } catch (java.io.IOException e) {
                return;
            }
        });
        reader.setDaemon(true);
        reader.start();
        reader.join(TimeUnit.SECONDS.toMillis(timeoutS));
    }
}
