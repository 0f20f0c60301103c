// An MCP client on the official TypeScript SDK that holds one session to
// MCP_URL (optional bearer token MCP_TOKEN) and calls tools as it is told:
// it prints {"session": id} once connected, then reads one JSON line per
// call from stdin ({"name": ..., "arguments": {...}}) and prints one JSON
// line per answer ({"result": ...} or {"error": "..."}). It closes the
// session at the end of its input. examples/notes's test drives it across
// the loss of the session's node.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.env.MCP_URL;
if (!url) throw new Error('MCP_URL is not set');
const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: 'mcpgrain-ts-session', version: '1.0.0' });
await client.connect(transport);
console.log(JSON.stringify({ session: transport.sessionId }));
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const call = JSON.parse(line);
  try {
    const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
    console.log(JSON.stringify({ result }));
  } catch (err) {
    console.log(JSON.stringify({ error: String(err?.message ?? err) }));
  }
}
await client.close();
