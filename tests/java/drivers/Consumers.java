// Rocklet's Java tier: the driver's consumer commands (push, consume, pull, read,
// litepull); what each prints is described in ClientDriver.java.

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

final class Consumers {
    private Consumers() {
    }


    // --- push ----------------------------------------------------------------------------

    static int push(String namesrv, String topic, String group, String sql, int expect,
                            long timeoutS) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        ClientDriver.configure(consumer, namesrv, group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        consumer.subscribe(topic, MessageSelector.bySql(sql));
        CountDownLatch stop = new CountDownLatch(1);
        AtomicInteger consumed = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                Events.emit(Events.consumedEvent(m));
                if (expect > 0 && consumed.incrementAndGet() >= expect) {
                    stop.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        if (!started(consumer)) {
            return ClientDriver.EXIT_START_FAILED;
        }
        boolean ended = untilStopped(stop, timeoutS);
        consumer.shutdown();
        Events.emit(Events.obj("event", "done", "consumed", consumed.get(), "timedOut", !ended));
        return 0;
    }

    /** Start a push consumer and say so: a {@code started} or {@code start_failed} event. */
    static boolean started(DefaultMQPushConsumer consumer) {
        try {
            consumer.start();
        } catch (MQClientException e) {
            Events.emit(Events.withCode(Events.obj("event", "start_failed", "error", Events.describe(e)), e));
            return false;
        }
        Events.emit(Events.obj("event", "started"));
        return true;
    }

    /**
     * Wait until {@code stop} opens, stdin closes (the test is done with this client), or
     * {@code timeoutS} passes; false when the time ran out.
     */
    static boolean untilStopped(CountDownLatch stop, long timeoutS) throws InterruptedException {
        Thread stdinWatch = new Thread(() -> {
            drain(System.in);
            stop.countDown();
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();
        return stop.await(timeoutS, TimeUnit.SECONDS);
    }

    static void drain(InputStream in) {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(in, StandardCharsets.UTF_8))) {
            while (r.readLine() != null) {
                // Only the end of stdin matters.
            }
        } catch (Exception e) {
            // A broken stdin ends the run like a closed one.
        }
    }

    // --- pull ----------------------------------------------------------------------------

    static int pull(String namesrv, String topic, String group, String sql)
        throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        ClientDriver.configure(consumer, namesrv, group);
        // The client pulls with SQL92 only from a broker whose version a heartbeat has
        // recorded: register the topic (its route, so its broker, is then polled from the
        // start) and heartbeat every second rather than every 30 s.
        consumer.setRegisterTopics(Collections.singleton(topic));
        consumer.setHeartbeatBrokerInterval(ClientDriver.HEARTBEAT_MS);
        MessageSelector selector = MessageSelector.bySql(sql);
        consumer.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
            queues.sort(Comparator.comparing(MessageQueue::getBrokerName)
                .thenComparingInt(MessageQueue::getQueueId));
            int total = 0;
            for (MessageQueue mq : queues) {
                long max = consumer.maxOffset(mq);
                long offset = 0;
                int found = 0;
                while (offset < max) {
                    PullResult r = pullOnceKnown(consumer, mq, selector, offset);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        for (MessageExt m : r.getMsgFoundList()) {
                            Events.emit(Events.consumedEvent(m));
                            found++;
                        }
                    }
                    if (r.getNextBeginOffset() <= offset) {
                        Events.emit(Events.obj("event", "pull_failed", "error", "no progress at offset "
                            + offset + " of queue " + mq.getQueueId() + ": " + r.getPullStatus()));
                        return ClientDriver.EXIT_FAILED;
                    }
                    offset = r.getNextBeginOffset();
                }
                total += found;
                Events.emit(Events.obj("event", "queue_done", "queueId", mq.getQueueId(), "maxOffset", max,
                    "found", found));
            }
            Events.emit(Events.obj("event", "done", "consumed", total));
            return 0;
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "pull_failed", "error", Events.describe(e)), e));
            return ClientDriver.EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }

    /**
     * One pull; while no heartbeat has yet recorded the broker's version, the client
     * refuses SQL92 pulls itself ("does not upgrade to support for filter message by
     * SQL92"): those are retried until ClientDriver.HEARTBEAT_WAIT_MS, and reported once.
     */
    private static PullResult pullOnceKnown(DefaultMQPullConsumer consumer, MessageQueue mq,
                                            MessageSelector selector, long offset)
        throws Exception {
        long deadline = System.currentTimeMillis() + ClientDriver.HEARTBEAT_WAIT_MS;
        boolean reported = false;
        while (true) {
            try {
                return consumer.pull(mq, selector, offset, ClientDriver.PULL_BATCH, ClientDriver.PULL_TIMEOUT_MS);
            } catch (MQClientException e) {
                boolean versionUnknown = e.getResponseCode() == -1 && e.getErrorMessage() != null
                    && e.getErrorMessage().contains(ClientDriver.VERSION_UNKNOWN);
                if (!versionUnknown || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                if (!reported) {
                    Events.emit(Events.obj("event", "pull_retry", "queueId", mq.getQueueId(),
                        "error", Events.describe(e)));
                    reported = true;
                }
                Thread.sleep(ClientDriver.RETRY_MS);
            }
        }
    }

    static int consume(String namesrv, String topic, String group,
                               Map<String, String> opts) throws Exception {
        String later = opts.getOrDefault("later", "never");
        boolean reply = Boolean.parseBoolean(opts.getOrDefault("reply", "false"));
        int expect = Integer.parseInt(opts.getOrDefault("expect", "0"));
        long timeoutS = Long.parseLong(opts.getOrDefault("timeout", "120"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        ClientDriver.configure(consumer, namesrv, group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        consumer.setMessageModel(MessageModel.valueOf(opts.getOrDefault("model", "CLUSTERING")));
        if (opts.containsKey("maxReconsumeTimes")) {
            consumer.setMaxReconsumeTimes(Integer.parseInt(opts.get("maxReconsumeTimes")));
        }
        consumer.subscribe(topic, opts.getOrDefault("tags", "*"));
        DefaultMQProducer replier = null;
        if (reply) {
            replier = new DefaultMQProducer("javatier_replier_" + ClientDriver.pid());
            ClientDriver.configure(replier, namesrv, "replier");
            replier.start();
        }
        final DefaultMQProducer replies = replier;
        CountDownLatch stop = new CountDownLatch(1);
        AtomicInteger consumed = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            for (MessageExt m : msgs) {
                boolean again = later.equals("always")
                    || (later.equals("first") && m.getReconsumeTimes() == 0);
                if (again) {
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                Map<String, Object> event = Events.consumedEvent(m);
                event.put("status", again ? "RECONSUME_LATER" : "CONSUME_SUCCESS");
                Events.emit(event);
                if (replies != null) {
                    sendReply(replies, m);
                }
                if (consumed.incrementAndGet() >= expect && expect > 0) {
                    stop.countDown();
                }
            }
            return status;
        });
        if (!started(consumer)) {
            return ClientDriver.EXIT_START_FAILED;
        }
        boolean ended = untilStopped(stop, timeoutS);
        consumer.shutdown();
        if (replies != null) {
            replies.shutdown();
        }
        Events.emit(Events.obj("event", "done", "consumed", consumed.get(), "timedOut", !ended));
        return 0;
    }

    private static void sendReply(DefaultMQProducer replies, MessageExt request) {
        try {
            String body = "reply:" + new String(request.getBody(), StandardCharsets.UTF_8);
            Message answer = MessageUtil.createReplyMessage(request,
                body.getBytes(StandardCharsets.UTF_8));
            SendResult r = replies.send(answer);
            Events.emit(Events.obj("event", "replied", "topic", answer.getTopic(),
                "status", r.getSendStatus().name(), "props", new TreeMap<>(answer.getProperties())));
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "reply_failed", "error", Events.describe(e)), e));
        }
    }

    // --- read: one queue with a pull consumer ----------------------------------------------

    static int read(String namesrv, String topic, String group, String broker, int queue,
                            int expect, long timeoutS) throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        ClientDriver.configure(consumer, namesrv, group);
        consumer.start();
        long deadline = System.currentTimeMillis() + timeoutS * 1000;
        MessageQueue mq = new MessageQueue(topic, broker, queue);
        int found = 0;
        try {
            long offset = 0;
            while (found < expect && System.currentTimeMillis() < deadline) {
                PullResult r = consumer.pullBlockIfNotFound(mq, "*", offset, ClientDriver.PULL_BATCH);
                if (r.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        Events.emit(Events.consumedEvent(m));
                        found++;
                    }
                }
                offset = r.getNextBeginOffset();
            }
            Events.emit(Events.obj("event", "done", "consumed", found));
            return found >= expect ? 0 : ClientDriver.EXIT_FAILED;
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "read_failed", "error", Events.describe(e)), e));
            return ClientDriver.EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }

    // --- litepull: assign, seek, poll, commit ------------------------------------------------

    static int litePull(String namesrv, String topic, String group, int queue, long seek,
                                int expect, long timeoutS) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        ClientDriver.configure(consumer, namesrv, group);
        consumer.setAutoCommit(false);
        consumer.setPullBatchSize(1);  // poll() hands over one message: the test counts them
        consumer.start();
        try {
            List<MessageQueue> queues = new ArrayList<>(consumer.fetchMessageQueues(topic));
            queues.sort(Comparator.comparing(MessageQueue::getBrokerName)
                .thenComparingInt(MessageQueue::getQueueId));
            MessageQueue target = null;
            List<Integer> ids = new ArrayList<>();
            for (MessageQueue mq : queues) {
                ids.add(mq.getQueueId());
                if (mq.getQueueId() == queue) {
                    target = mq;
                }
            }
            consumer.assign(queues);
            Events.emit(Events.obj("event", "assigned", "queueIds", ids.toString()));
            if (target == null) {
                Events.emit(Events.obj("event", "litepull_failed", "error", "no queue " + queue));
                return ClientDriver.EXIT_FAILED;
            }
            if (seek >= 0) {
                consumer.seek(target, seek);
                Events.emit(Events.obj("event", "seeked", "queueId", queue, "offset", seek));
            } else {
                Events.emit(Events.obj("event", "committed", "when", "start", "queueId", queue,
                    "offset", consumer.committed(target)));
            }
            long deadline = System.currentTimeMillis() + timeoutS * 1000;
            int got = 0;
            while (got < expect && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    Events.emit(Events.consumedEvent(m));
                    if (m.getQueueId() == queue) {
                        got++;
                    }
                }
            }
            consumer.commitSync();
            long committed = consumer.committed(target);
            // 4.9.4's commitSync() only updates memory, and shutdown() stores it with a
            // oneway request, which a real RocketMQ broker was seen not to have stored
            // when the next consumer asked. Store it with a request that is answered, so
            // the next consumer's committed() tests the broker, not the race.
            if (committed >= 0) {
                consumer.getOffsetStore().updateConsumeOffsetToBroker(target, committed, false);
            }
            Events.emit(Events.obj("event", "committed", "when", "end", "queueId", queue,
                "offset", committed));
            Events.emit(Events.obj("event", "done", "consumed", got));
            return got >= expect ? 0 : ClientDriver.EXIT_FAILED;
        } catch (Exception e) {
            Events.emit(Events.withCode(Events.obj("event", "litepull_failed", "error", Events.describe(e)), e));
            return ClientDriver.EXIT_FAILED;
        } finally {
            consumer.shutdown();
        }
    }
}
