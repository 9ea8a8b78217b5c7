import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import { presentChatMessage, type ChatService } from './chat-service.js';
import { listMessagesQuery, sendBody } from './schemas.js';

const owner = (principal: { orgId: string; identityId: string }) => ({ orgId: principal.orgId, identityId: principal.identityId });

export interface ChatToolDeps {
  chat: ChatService;
}

const defineTool = toolDefiner<ChatToolDeps>();

/** MCP tools of the chat integration (SPEC 4.3): the same service calls as /v0/chat. */
export const chatTools: ToolDefinition<ChatToolDeps>[] = [
  defineTool({
    name: 'chat_list_channels',
    title: 'List chat channels',
    description: 'Lists the connected workspace\'s channels the bot can see, with botIsMember. The bot can read and post only where it is a member; a person invites it with /invite.',
    scope: 'chat:read',
    input: z.object({}),
    run: async ({ chat }, principal) => {
      const channels = await chat.channels(owner(principal));
      return { channels, count: channels.length };
    },
  }),
  defineTool({
    name: 'chat_list_messages',
    title: 'List received chat messages',
    description: 'Messages people wrote in channels the bot is in, newest first. Poll with since = the receivedAt of the newest message you already have; filter with channel.',
    scope: 'chat:read',
    input: z.object({
      channel: z.string().optional(), since: z.string().optional(), limit: z.number().int().min(1).max(100).optional(), pageToken: z.string().optional(),
    }),
    run: async ({ chat }, principal, input) => {
      const page = await chat.listMessages(owner(principal), listMessagesQuery.parse(input));
      const messages = page.items.map(presentChatMessage);
      return { messages, count: messages.length, ...(page.nextPageToken ? { nextPageToken: page.nextPageToken } : {}) };
    },
  }),
  defineTool({
    name: 'chat_send_message',
    title: 'Send a chat message',
    description: 'Posts text to a channel (by id). Pass the ts of a message as threadTs to reply in its thread. Fails with not_in_channel until the bot is invited.',
    scope: 'chat:send',
    input: sendBody,
    run: async ({ chat }, principal, input) => chat.send(owner(principal), input),
  }),
];
