// An MCP client built on the official TypeScript SDK that signs in with a
// static bearer token, as README's "Clients" section shows: it connects
// over Streamable HTTP with an Authorization header, lists the tools,
// calls execute with CODE and prints one JSON line {tools, result}.
// internal/systemtest/clients_test.go runs it against a dev-style node.
//
// Environment: MCP_URL (the /mcp endpoint), MCPGRAIN_TOKEN (the bearer
// token), CODE (TypeScript for execute; default: list the demo to-dos).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL ?? 'http://127.0.0.1:8080/mcp'), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCPGRAIN_TOKEN}` } },
});
const client = new Client({ name: 'mcpgrain-readme-ts', version: '1.0.0' });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({
  name: 'execute',
  arguments: { code: process.env.CODE ?? 'return await tools.demo.listTodos()' },
});
process.stdout.write(JSON.stringify({ tools: tools.map((t) => t.name), result }) + '\n');
await client.close();
