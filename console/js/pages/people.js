// @ts-check
// Members and invitations: the list by email, inviting by email with a role (the answer's one-time link is shown
// to share with the person: it is what makes them a member), changing roles, removing members and withdrawing
// invitations. The API enforces who may grant what (only owners grant owner; the last owner stays).

import { h, fill, field, notice, table, when, badge, copyButton } from '../dom.js';
import { call, all, can } from '../api.js';

const ROLES = ['viewer', 'member', 'admin', 'owner'];

export async function render(main) {
  const error = notice();
  const list = h('div', { id: 'members' });
  const write = can('organization:write');
  const load = async () => {
    const members = await all('/organization/members');
    fill(
      list,
      table(
        [
          ['Email', (m) => m.email],
          ['Role', (m) => (write && m.user_id ? roleSelect(m, error, load) : m.role)],
          ['Status', (m) => badge(m.status)],
          ['Since', (m) => when(m.created_at)],
          [
            '',
            (m) =>
              write
                ? h(
                    'button',
                    {
                      type: 'button',
                      class: 'small danger',
                      onclick: async () => {
                        try {
                          await call(
                            'DELETE',
                            m.user_id
                              ? `/organization/members/${m.user_id}`
                              : `/organization/invitations/${m.invitation_id}`,
                          );
                          await load();
                        } catch (e) {
                          error.show(e);
                        }
                      },
                    },
                    m.user_id ? 'Remove' : 'Withdraw',
                  )
                : '',
          ],
        ],
        members,
      ),
    );
  };
  const shared = h('div', { id: 'invite-link' });
  const email = h('input', { type: 'email', required: true });
  const role = h(
    'select',
    {},
    ROLES.map((r) => h('option', { value: r, selected: r === 'member' }, r)),
  );
  const invite = h(
    'form',
    { class: 'inline', id: 'invite' },
    field('Email', email),
    field('Role', role),
    h('button', { type: 'submit', class: 'primary' }, 'Invite'),
  );
  invite.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const invited = await call('POST', '/organization/members', { email: email.value.trim(), role: role.value });
      email.value = '';
      // The link exists only in this answer: shown once, to share with the invited person only.
      fill(
        shared,
        h(
          'p',
          {},
          `Share this link with ${invited.email}: whoever opens it joins as ${invited.role}. It works once, until ${when(invited.expires_at)}, and is not shown again.`,
        ),
        h(
          'p',
          {},
          h('input', {
            type: 'text',
            readonly: true,
            class: 'secret',
            value: invited.invite_url,
            'aria-label': 'Invitation link',
          }),
          ' ',
          copyButton('Copy', invited.invite_url),
        ),
      );
      await load();
    } catch (e) {
      error.show(e);
    }
  });
  fill(main, h('h1', {}, 'Members'), error, write ? invite : null, shared, list);
  await load();
}

function roleSelect(member, error, reload) {
  const select = h(
    'select',
    { 'aria-label': `Role of ${member.email}` },
    ROLES.map((r) => h('option', { value: r, selected: r === member.role }, r)),
  );
  select.addEventListener('change', async () => {
    try {
      await call('PATCH', `/organization/members/${member.user_id}`, { role: select.value });
    } catch (e) {
      error.show(e);
      select.value = member.role;
    }
    await reload();
  });
  return select;
}
