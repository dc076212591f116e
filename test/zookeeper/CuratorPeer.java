// A Java client of the same ensemble using Apache Curator's recipes, driven line by line
// over stdin, so the interop test can make Curator and locksmith contend for one path.
// Run in source-file mode: java -cp <curator jars> CuratorPeer.java <connect> <path> <kind>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorPeer {
  public static void main(String[] args) throws Exception {
    String connect = args[0];
    String path = args[1];
    String kind = args[2];
    CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10_000, 10_000, new RetryNTimes(5, 200));
    client.start();
    client.blockUntilConnected();
    InterProcessLock lock = null;
    InterProcessSemaphoreV2 semaphore = null;
    Lease lease = null;
    if (kind.equals("mutex")) lock = new InterProcessMutex(client, path);
    else if (kind.equals("read")) lock = new InterProcessReadWriteLock(client, path).readLock();
    else if (kind.equals("write")) lock = new InterProcessReadWriteLock(client, path).writeLock();
    else if (kind.startsWith("semaphore:")) semaphore = new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring(10)));
    else throw new IllegalArgumentException(kind);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    System.out.println("READY");
    String line;
    while ((line = in.readLine()) != null) {
      if (line.startsWith("acquire ")) {
        long ms = Long.parseLong(line.substring(8).trim());
        boolean ok;
        if (semaphore != null) {
          lease = semaphore.acquire(ms, TimeUnit.MILLISECONDS);
          ok = lease != null;
        } else {
          ok = lock.acquire(ms, TimeUnit.MILLISECONDS);
        }
        System.out.println(ok ? "ACQUIRED" : "TIMEOUT");
      } else if (line.equals("release")) {
        if (semaphore != null) semaphore.returnLease(lease);
        else lock.release();
        System.out.println("RELEASED");
      } else if (line.equals("quit")) {
        break;
      }
    }
    client.close();
  }
}
