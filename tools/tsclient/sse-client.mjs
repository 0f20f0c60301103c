// An MCP client on the official TypeScript SDK's HTTP+SSE transport
// (protocol 2024-11-05: GET /sse, POST to the endpoint it announces).
// internal/systemtest/legacysse_test.go runs it with node: it connects,
// lists the tools, runs MCP_CODE with execute and prints one JSON line
// {"tools", "execute"}; then it waits for a line on
// stdin (the execution was decided), calls resume with the execute's
// executionId and prints {"resume"}.
//
// Environment: MCP_URL (the /sse endpoint), MCP_TOKEN (bearer token),
// MCP_CODE (code for execute).
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const auth = { Authorization: `Bearer ${env('MCP_TOKEN')}` };
const transport = new SSEClientTransport(new URL(env('MCP_URL')), {
  requestInit: { headers: auth },
  eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...(init?.headers ?? {}), ...auth } }) },
});
const client = new Client({ name: 'mcpgrain-ts-sse-test', version: '1.0.0' });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const execute = await client.callTool({ name: 'execute', arguments: { code: env('MCP_CODE') } });
process.stdout.write(JSON.stringify({ tools, execute }) + '\n');

const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
const executionId = execute.structuredContent?.executionId;
const resume = await client.callTool({ name: 'resume', arguments: { executionId, action: 'accept' } });
process.stdout.write(JSON.stringify({ resume }) + '\n');
await client.close();
process.exit(0);
