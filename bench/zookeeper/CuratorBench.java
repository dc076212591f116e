// Apache Curator's InterProcessMutex as a contender of the benchmark matrix (bench/zookeeper.ts):
// one JVM holding many Curator clients (each its own ZooKeeper session), driven by lines on
// stdin, answering on stdout. Every acquisition runs on a thread of its own, because an
// InterProcessMutex must be released by the thread that acquired it; `cancel` interrupts the
// thread, which makes Curator delete its queue node (and release, if the grant came first).
//
//   in:  open <c> | acquire <c> <r> <path> | release <r> | cancel <r> | close <c> | quit
//   out: READY | OPEN <c> | ACQUIRED <r> | FAILED <r> <why> | RELEASED <r> | CLOSED <c>
//
// Run in source-file mode: java -cp <curator jars> CuratorBench.java <connect string>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBench {
  static final Map<String, CuratorFramework> clients = new ConcurrentHashMap<>();
  static final Map<String, Thread> threads = new ConcurrentHashMap<>();
  static final Map<String, CountDownLatch> releases = new ConcurrentHashMap<>();

  static synchronized void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static void acquire(CuratorFramework client, String r, String path) {
    InterProcessMutex mutex = new InterProcessMutex(client, path);
    try {
      mutex.acquire();
    } catch (Exception e) {
      threads.remove(r);
      say("FAILED " + r + " " + e.getClass().getSimpleName());
      return;
    }
    CountDownLatch release = new CountDownLatch(1);
    releases.put(r, release);
    say("ACQUIRED " + r);
    try {
      release.await();
    } catch (InterruptedException e) {
      // Cancelled after the grant: give the lock back all the same.
    }
    releases.remove(r);
    threads.remove(r);
    try {
      mutex.release();
    } catch (Exception e) {
      // The session may be gone (closed client); the node went with it.
    }
    say("RELEASED " + r);
  }

  public static void main(String[] args) throws Exception {
    String connect = args[0];
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    say("READY");
    String line;
    while ((line = in.readLine()) != null) {
      String[] w = line.trim().split(" ");
      switch (w[0]) {
        case "open" -> {
          CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10_000, 10_000, new RetryNTimes(5, 200));
          client.start();
          client.blockUntilConnected();
          clients.put(w[1], client);
          say("OPEN " + w[1]);
        }
        case "acquire" -> {
          CuratorFramework client = clients.get(w[1]);
          String r = w[2];
          String path = w[3];
          Thread t = new Thread(() -> acquire(client, r, path));
          threads.put(r, t);
          t.start();
        }
        case "release" -> {
          CountDownLatch release = releases.get(w[1]);
          if (release != null) release.countDown();
          else say("RELEASED " + w[1]);
        }
        case "cancel" -> {
          Thread t = threads.get(w[1]);
          if (t != null) t.interrupt();
        }
        case "close" -> {
          CuratorFramework client = clients.remove(w[1]);
          if (client != null) client.close();
          say("CLOSED " + w[1]);
        }
        case "quit" -> System.exit(0);
        default -> say("FAILED - unknown command " + w[0]);
      }
    }
    System.exit(0);
  }
}
