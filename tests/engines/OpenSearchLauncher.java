import java.io.IOException;

import org.codelibs.opensearch.runner.OpenSearchRunner;

/**
 * Starts one OpenSearch node through codelibs' OpenSearchRunner on exactly the HTTP port asked for
 * (-baseHttpPort + 1). Compiled and run by tests/engines/engines.py; takes the runner's own arguments.
 *
 * Why not the runner's main(): it only accepts HTTP ports up to 9299 (maxHttpPort) and silently
 * moves to the next port when one is taken; the test suite needs 19200+ and a stable port across a
 * kill and restart.
 *
 * With -Da2m.node.name=NAME the node gets that name, so that several JVMs, one node each, can form
 * one cluster (their discovery settings come from each node's opensearch.yml).
 */
public final class OpenSearchLauncher {
    private OpenSearchLauncher() {
    }

    public static void main(final String[] args) throws InterruptedException {
        final OpenSearchRunner runner = new OpenSearchRunner();
        // A negative maximum makes the runner use baseHttpPort + 1 as given, without probing.
        runner.setMaxHttpPort(-1);
        // A cluster member's name (engines.py `cluster`): the runner would call every JVM's only
        // node "Node 1", and the cluster's bootstrap names its first cluster managers by name.
        final String nodeName = System.getProperty("a2m.node.name");
        if (nodeName != null) {
            // With -numOfNode 1 the runner would also make it a single-node cluster: "zen"
            // is OpenSearch's own discovery, which reads discovery.seed_hosts.
            runner.onBuild((index, settings) -> settings.put("node.name", nodeName)
                    .put("discovery.type", "zen"));
        }
        // SIGTERM runs this hook: close the node cleanly (flush, release locks) before the JVM exits.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                runner.close();
            } catch (final IOException e) {
                System.err.println("Failed to close OpenSearch cleanly: " + e);
            }
        }));
        try {
            runner.build(args);
        } catch (final RuntimeException e) {
            e.printStackTrace();
            System.exit(1);
        }
        while (!runner.isClosed()) {
            Thread.sleep(1000);
        }
    }
}
