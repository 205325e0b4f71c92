-- Conversation levels and track-only threads (SPEC §18).

-- A user's level for one conversation: it replaces their messages, replies and quotedReplies
-- preferences there (`all`, `mentions`, `nothing`). A fact of the user's, like a preference: read
-- by routing when a message is routed.
CREATE TABLE conversation_levels (
    app              text   NOT NULL,
    uid              text   NOT NULL,
    conversation_id  text   NOT NULL,
    level            text   NOT NULL CHECK (level IN ('all', 'mentions', 'nothing')),
    updated_at       bigint NOT NULL,
    PRIMARY KEY (app, uid, conversation_id)
);
-- routing reads the levels of a recipient set in one conversation with one range scan
CREATE INDEX conversation_levels_by_conversation ON conversation_levels (app, conversation_id, uid COLLATE "C") INCLUDE (level);
-- the list: newest change first
CREATE INDEX conversation_levels_by_change ON conversation_levels (app, uid, updated_at, conversation_id COLLATE "C");

-- A subscription's level: `track` (true) keeps the thread in the inbox with its counts but pushes
-- only explicit and @all mentions of its replies; `notify` (false) is every subscription until
-- told otherwise. Adding a column with a constant default rewrites nothing.
ALTER TABLE subscriptions ADD COLUMN tracked boolean NOT NULL DEFAULT false;

-- The feed shows both (SPEC §18): a subscription item's `level`, and conversationLevel items.
ALTER TABLE changes ADD COLUMN level text;   -- subscription: notify|track; conversationLevel: the level, null when removed
ALTER TABLE changes DROP CONSTRAINT changes_kind_check;
ALTER TABLE changes ADD CONSTRAINT changes_kind_check
    CHECK (kind IN ('subscription', 'read', 'messagePin', 'save', 'conversationPin', 'preferences', 'mutes', 'device',
                    'conversationLevel'));

DROP TRIGGER subscriptions_feed_update ON subscriptions;
CREATE TRIGGER subscriptions_feed_update AFTER UPDATE ON subscriptions
    FOR EACH ROW
    WHEN ((OLD.subscribed, OLD.source, OLD.reason, OLD.since, OLD.read_at, OLD.read_id, OLD.tracked)
          IS DISTINCT FROM (NEW.subscribed, NEW.source, NEW.reason, NEW.since, NEW.read_at, NEW.read_id, NEW.tracked))
    EXECUTE FUNCTION herald_note_subscription();
CREATE TRIGGER conversation_levels_feed AFTER INSERT OR UPDATE OR DELETE ON conversation_levels
    FOR EACH ROW EXECUTE FUNCTION herald_note_user_change('conversationLevel', 'conversation_id');
