import t from 'tap'
import { addressKey } from '../src/auth/auth-failure-limiter.js'

t.test('failures are counted per IPv4 address and per IPv6 /64', async (t) => {
  t.equal(addressKey('203.0.113.7'), '203.0.113.7')
  t.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7', 'IPv4-mapped is the IPv4 address')
  t.equal(addressKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(addressKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64', 'one /64, whichever host in it')
  t.equal(addressKey('2001:db8::1'), '2001:db8:0:0::/64')
  t.equal(addressKey('::1'), '0:0:0:0::/64')
  t.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64', 'a zone id is left out')
  t.equal(addressKey(undefined), 'unknown')
})
