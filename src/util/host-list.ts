/**
 * Host lists in URLs (`zookeeper://h1:2181,h2:2181/x`): encoded so that the URL parses, and
 * decoded back for messages.
 */

/**
 * `zookeeper://h1:2181,h2:2181/x` is how every ZooKeeper and Cassandra user writes a
 * cluster, but a host list with ports is not a valid WHATWG URL. Percent-encode the colons
 * inside such a list, so the URL parses with the whole list as its (opaque) host; a backend
 * reads it back with `hostList` (url-params.ts).
 */
export function encodeHostList(raw: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)((?:[^@/?#]*@)?)([^/?#]*)(.*)$/is.exec(raw);
  if (!m || !m[3]?.includes(',')) return raw;
  return `${m[1]}${m[2]}${m[3].replace(/:/g, '%3A')}${m[4]}`;
}

/** The inverse of {@link encodeHostList} on a URL's `href`, for messages. */
export function decodeHostList(href: string): string {
  return href.replace(
    /^([a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?)([^/?#]*)/i,
    (_all, head: string, host: string) => `${head}${host.replace(/%3A/gi, ':')}`,
  );
}
