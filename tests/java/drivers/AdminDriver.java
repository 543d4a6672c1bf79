// Rocklet's Java tier: the real RocketMQ 4.9.4 mqadmin, many verbs in one JVM.
//
//   AdminDriver
//       Reads one command per line on stdin: the verb and its arguments, separated by
//       tabs, every field percent-encoded (UTF-8), exactly what would follow "mqadmin" on
//       a shell line (e.g. "topicRoute\t-n\t127.0.0.1:9876\t-t\tT"). Each runs through
//       MQAdminStartup.main0(args, null), the tool's own entry point (4.9.4 main() only
//       calls it), with System.out and System.err redirected to one buffer for the call,
//       as a terminal would show "2>&1". After each command it prints one line
//       {"event":"result","seq":N,"output":TEXT} (or "error" when main0 itself threw,
//       which it does not for a failing verb: the tool prints the stack trace and returns).
//       Prints {"event":"ready"} first and {"event":"done"} when stdin closes, then exits.
//
// Each verb is an object that keeps the DefaultMQAdminExt or producer it makes in a field
// (created once, shut down after each use): a second run of the same object would use a
// client already shut down. So every command runs with a new set of verb objects, as in a
// fresh JVM.
//
// mqadmin 4.9.4 calls System.exit only when a verb's command line does not parse (or has
// -h): ServerUtil.parseCmdLine prints the help and exits. So the driver parses every
// command line first, the tool's way (the verb's options after ServerUtil's, PosixParser),
// and answers one that does not parse with {"event":"result","seq":N,"error":"usage: ..."}
// without running it. clusterRT and startMonitoring never return: do not send them. Every verb builds its own DefaultMQAdminExt (most name its instance
// after System.currentTimeMillis()) and shuts it down, which removes its client instance;
// producers and consumers some verbs create are named after "rocketmq.client.name" unless
// the verb names them, so that property is set to a fresh name per command: two commands
// never share a client instance.
//
// Two verbs ship in the 4.9.4 tools jar without being in MQAdminStartup's list, so the
// released mqadmin answers "The sub command X not exist." for them: getConsumerStatus
// (GetConsumerStatusCommand) and consumer (ConsumerSubCommand). The driver puts them in
// the list before main0 adds the others, so they run through the same entry point.
//
// Give -Drocketmq.home.dir=<release> (main0 loads conf/logback_tools.xml from there) and
// -Duser.home=<a tmp dir> (the tool's and the client's logs go under logs/rocketmqlogs).

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.ParseException;
import org.apache.commons.cli.PosixParser;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;
import org.apache.rocketmq.tools.command.consumer.ConsumerSubCommand;
import org.apache.rocketmq.tools.command.offset.GetConsumerStatusCommand;

// A subclass only to read MQAdminStartup's (protected) list of verbs.
public final class AdminDriver extends MQAdminStartup {
    private AdminDriver() {
    }

    public static void main(String[] args) {
        int code = 0;
        try {
            serve();
        } catch (Throwable t) {
            Events.emit(Events.obj("event", "fatal", "error", Events.describe(t)));
            code = 1;
        }
        Events.flush();
        // The tool's client threads are not all daemons: exit outright.
        System.exit(code);
    }

    private static void serve() throws Exception {
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        Events.open(stdout);
        // Between commands the client's threads may still print: not on the events' stream.
        System.setOut(stderr);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Events.emit(Events.obj("event", "ready"));
        long seq = 0;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            seq++;
            String[] fields = line.split("\t", -1);
            String[] verb = new String[fields.length];
            for (int i = 0; i < fields.length; i++) {
                verb[i] = URLDecoder.decode(fields[i], "UTF-8");
            }
            Events.emit(run(seq, verb, stderr));
        }
        Events.emit(Events.obj("event", "done", "commands", seq));
    }

    /** Why the tool would exit instead of running {@code verb}, or null. */
    private static String unparsable(String[] verb) {
        if (verb.length < 1) {
            return "usage: no verb";
        }
        for (SubCommand cmd : subCommandList) {
            if (cmd.commandName().equalsIgnoreCase(verb[0])
                || (cmd.commandAlias() != null && cmd.commandAlias().equalsIgnoreCase(verb[0]))) {
                Options options = cmd.buildCommandlineOptions(ServerUtil.buildCommandlineOptions(new Options()));
                try {
                    if (new PosixParser().parse(options, Arrays.copyOfRange(verb, 1, verb.length)).hasOption('h')) {
                        return "usage: -h prints the help and exits";
                    }
                } catch (ParseException e) {
                    return "usage: " + cmd.commandName() + ": " + e.getMessage();
                }
                return null;
            }
        }
        return null; // the tool prints "The sub command X not exist."
    }

    /** The shipped verbs MQAdminStartup.initCommand leaves out (see the top). */
    private static void addUnlisted() {
        initCommand(new GetConsumerStatusCommand());
        initCommand(new ConsumerSubCommand());
    }

    private static Map<String, Object> run(long seq, String[] verb, PrintStream stderr) {
        // The verbs are objects that keep what they made (a DefaultMQAdminExt, a producer)
        // in fields and shut it down after use, so each command gets new ones: main0 adds a
        // fresh set to the (then empty) list and runs the first match, as in a new JVM.
        subCommandList.clear();
        addUnlisted();
        initCommand();
        String usage = unparsable(verb);
        subCommandList.clear();
        addUnlisted();
        if (usage != null) {
            return Events.obj("event", "result", "seq", seq, "output", "", "error", usage);
        }
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        PrintStream captured = new PrintStream(buffer, true, StandardCharsets.UTF_8);
        System.setProperty("rocketmq.client.name", "mqadmin_" + seq + "_" + ProcessHandle.current().pid());
        String error = null;
        System.setOut(captured);
        System.setErr(captured);
        try {
            MQAdminStartup.main0(verb, null);
        } catch (Throwable t) {
            error = Events.describe(t);
        } finally {
            System.setOut(stderr);
            System.setErr(stderr);
        }
        captured.flush();
        Map<String, Object> result = Events.obj("event", "result", "seq", seq,
            "output", buffer.toString(StandardCharsets.UTF_8));
        if (error != null) {
            result.put("error", error);
        }
        return result;
    }
}
